"""Exports to CTranslate2 and ONNX Runtime (appendix 16): what they refuse, in one line, before writing anything; what they
leave as it was; and the command line. The parity runs on the whole test set are the appendix's own checks."""
import sys

import pytest
import torch

from transformer_nb.export import export_ctranslate2, export_onnx
from transformer_nb.model import make_model
from transformer_nb.onnx_model import OnnxModel
from transformer_nb.tokenizer import Tokenizer
from transformer_nb.translator import load_pretrained, translate

pytest.importorskip("ctranslate2")
pytest.importorskip("onnxruntime")
EXPORTS = [export_ctranslate2, export_onnx]


@pytest.fixture(scope="module")
def small():
    "A small untrained translator: a tokenizer of a few sentences and a model of its vocabulary."
    tokenizer = Tokenizer.train(["Ein Hund läuft.", "A dog runs.", "Zwei Katzen schlafen.", "Two cats sleep."], 60)
    torch.manual_seed(0)
    return make_model(len(tokenizer), len(tokenizer), N=1, d_model=16, d_ff=32, h=2).eval(), tokenizer


@pytest.mark.parametrize("export", EXPORTS)
def test_an_export_changes_nothing_of_the_model(export, small, tmp_path):
    "CTranslate2 quantizes the arrays it is given in place: the export hands it copies."
    model, tokenizer = small
    before = {k: v.clone() for k, v in model.state_dict().items()}
    options = {"quantization": "int8"} if export is export_ctranslate2 else {}
    export(tmp_path / "out", model, tokenizer, **options)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("export", EXPORTS)
def test_an_existing_folder_is_replaced_only_with_overwrite(export, small, tmp_path):
    model, tokenizer = small
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="the folder exists; pass overwrite=True"):
        export(tmp_path / "out", model, tokenizer)
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep me"
    export(tmp_path / "out", model, tokenizer, overwrite=True)
    assert not (tmp_path / "out" / "mine.txt").exists() and any((tmp_path / "out").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]          # no temporary folder left beside it
    (tmp_path / "file").write_text("a file")
    with pytest.raises(ValueError, match="a file is there"):
        export(tmp_path / "file", model, tokenizer, overwrite=True)


@pytest.mark.parametrize("export", EXPORTS)
def test_an_export_that_fails_midway_leaves_the_old_folder(export, small, tmp_path, monkeypatch):
    model, tokenizer = small
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    import ctranslate2
    monkeypatch.setattr(ctranslate2.converters.Converter, "convert",
                        lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        export(tmp_path / "out", model, tokenizer, overwrite=True)
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("export", EXPORTS)
def test_what_an_export_refuses(export, small, tmp_path):
    model, tokenizer = small
    with pytest.raises(TypeError, match="`model` must be a model built by make_model"):
        export(tmp_path / "a", torch.nn.Linear(2, 2), tokenizer)
    with pytest.raises(TypeError, match="`tokenizer` must be a Tokenizer"):
        export(tmp_path / "a", model, "not a tokenizer")
    other = make_model(len(tokenizer) + 1, len(tokenizer) + 1, N=1, d_model=16, d_ff=32, h=2)
    with pytest.raises(ValueError, match="the model's vocabularies"):
        export(tmp_path / "a", other, tokenizer)
    with pytest.raises(TypeError, match="`overwrite` must be True or False"):
        export(tmp_path / "a", model, tokenizer, overwrite="yes")
    with pytest.raises(ValueError, match="`path` is empty"):
        export("", model, tokenizer)
    assert not (tmp_path / "a").exists()


def test_ctranslate2_refuses_a_final_norm_after_post_norm_layers_before_writing(small, tmp_path):
    _, tokenizer = small
    model = make_model(len(tokenizer), len(tokenizer), N=1, d_model=16, d_ff=32, h=2, final_norm=True)
    with pytest.raises(ValueError, match="final LayerNorm after post-norm layers.*CTranslate2"):
        export_ctranslate2(tmp_path / "a", model, tokenizer)
    assert not list(tmp_path.iterdir())
    export_onnx(tmp_path / "b", model, tokenizer)                         # ONNX holds any graph


@pytest.mark.parametrize("module, call", [
    ("ctranslate2", lambda m, t, p: export_ctranslate2(p, m, t)),
    ("onnx", lambda m, t, p: export_onnx(p, m, t)),
    ("onnxruntime", lambda m, t, p: OnnxModel(p)),
])
def test_a_missing_engine_says_how_to_install_it(module, call, small, tmp_path, monkeypatch):
    model, tokenizer = small
    export_onnx(tmp_path / "onnx", model, tokenizer)
    monkeypatch.setitem(sys.modules, module, None)                        # `import module` raises ImportError
    with pytest.raises(ImportError, match=r"pip install transformer_nb\[serve\]"):
        call(model, tokenizer, tmp_path / ("onnx" if module == "onnxruntime" else "new"))


def test_onnx_model_names_the_files_a_folder_lacks(tmp_path):
    with pytest.raises(FileNotFoundError, match="encoder.onnx, decoder.onnx, translator.json missing"):
        OnnxModel(tmp_path)


def test_an_onnx_model_decodes_with_chapter_06s_loops(small, tmp_path):
    "Greedy decoding and beam search through `OnnxModel.steps`: the same outputs as PyTorch's, on an untrained model."
    model, tokenizer = small
    export_onnx(tmp_path / "m", model, tokenizer)
    onnx = OnnxModel(tmp_path / "m", threads=1)
    sentences = ["Ein Hund läuft.", "Zwei Katzen schlafen.", "Ein Hund."]
    for beam_size in (1, 3):
        assert translate(onnx, onnx.tokenizer, sentences, beam_size=beam_size, batch_size=2) == \
            translate(model, tokenizer, sentences, beam_size=beam_size, batch_size=2)


def test_the_command_line_exports_and_refuses_in_one_line(tmp_path, capsys):
    import ctranslate2
    from transformer_nb.cli import main
    assert main(["export", "--to", "ctranslate2", str(tmp_path / "ct2"), "--pretrained", "--quantization", "int8"]) == 0
    assert "wrote" in capsys.readouterr().out
    _, tokenizer, _ = load_pretrained()
    out = ctranslate2.Translator(str(tmp_path / "ct2")).translate_batch([tokenizer.pieces("Ein Hund läuft.")])
    assert out[0].hypotheses[0][:2] == ["▁A", "▁dog"]
    refusals = [
        (["export", "--to", "ctranslate2", str(tmp_path / "ct2"), "--pretrained"], "the folder exists; pass --overwrite"),
        (["export", "--to", "onnx", str(tmp_path / "new")], "give --checkpoint PATH or --pretrained"),
        (["export", "--to", "onnx", str(tmp_path / "new"), "--pretrained", "--quantization", "int8"],
         "only --to ctranslate2 quantizes"),
        (["export", "--to", "tflite", str(tmp_path / "new"), "--pretrained"], "invalid choice: 'tflite'"),
        (["export", "--to", "onnx", str(tmp_path / "new"), "--checkpoint", str(tmp_path / "none.pt")],
         "--checkpoint"),
    ]
    for argv, message in refusals:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "new").exists()
