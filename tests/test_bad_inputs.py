"""Bad input gets one clear line that names what was wrong, before any work: the command line exits 2 with the option
named, the API raises ValueError or TypeError naming the argument. (Issue: a hostile tester's inputs; more to come.)"""
import contextlib
import io
import re
from dataclasses import asdict

import pytest
import torch

import transformer_nb.masks as masks
from transformer_nb.cli import main
from transformer_nb.model import make_model
from transformer_nb.translation_task import TranslationRecipe


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:
            status = e.code
    return status, out.getvalue(), err.getvalue()


CLI = [
    (["copy", "--N", "100000", "--d-model", "8"], "`N` must be at most 1,000, got 100,000"),       # used to hang
    (["copy", "--d-model", "100000"], "`d_model` must be at most 65,536"),
    (["copy", "--N", "500", "--d-model", "65536", "--h", "4"], "more than this package builds"),
    (["summary", "--src-vocab", "20000000"], "`src_vocab` must be at most 10,000,000"),
    (["summary", "--src-vocab", "9000000", "--tgt-vocab", "9000000"], "more than this package builds"),
    (["copy", "--h", "5"], "d_model=32 must be divisible by the number of heads h=5"),
    (["translate", "--h", "3", "--data", "."], "d_model=256 must be divisible by the number of heads h=3"),
    (["copy", "--N", "0"], "argument --N: expected a positive integer, got 0"),
    (["copy", "--threads", "100000"], "argument --threads: expected at most"),            # crashed PyTorch (SIGSEGV)
    (["copy", "--threads", "0"], "argument --threads: expected a positive integer, got 0"),
    (["copy", "--N", "-3"], "argument --N: expected a positive integer, got -3"),
    (["copy", "--N", "two"], "argument --N: invalid _positive value: 'two'"),
    (["copy", "--epochs", "0"], "argument --epochs: expected a positive integer, got 0"),
    (["copy", "--seed", str(2**70)], "argument --seed: expected a seed in [0, 2**63)"),
    (["copy", "--seed", "-1"], "argument --seed: expected a seed in [0, 2**63)"),
    (["copy", "--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
    (["copy", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["summary", "--dropout", "1.5"], "argument --dropout: expected a probability in [0, 1), got 1.5"),
    (["summary", "--dropout", "nan"], "argument --dropout: expected a probability in [0, 1), got nan"),
    (["translate", "--length-penalty", "-1", "--data", "."], "argument --length-penalty: expected a number in [0, 10]"),
    (["translate", "--length-penalty", "inf", "--data", "."], "argument --length-penalty: expected a number in [0, 10]"),
    (["translate", "--length-penalty", "nan", "--data", "."], "argument --length-penalty: expected a number in [0, 10]"),
    (["translate", "--length-penalty", "1e308", "--data", "."], "argument --length-penalty: expected a number in [0, 10]"),
    (["copy", "--checkpoint", "no/such/file.pt"], "--checkpoint no/such/file.pt: no such file"),
    (["copy", "--resume", "no/such/file.pt"], "--resume no/such/file.pt: no such file"),
    (["copy", "--checkpoint", "."], "--checkpoint .: a folder, not a file"),
    (["translate", "--resume", ".", "--data", "."], "--resume .: a folder, not a file"),
    (["copy", "--save", ""], "`--save` is empty"),
    (["copy", "--checkpoint", "x.pt", "--save", "y.pt"], "cannot be combined with --save or --resume"),
    (["translate", "--data", "no/such/folder"], "--data no/such/folder: not a folder"),
    (["translate", "--data", ""], "--data '': not a folder"),
    (["translate", "--data", "  "], "--data   : not a folder"),
    (["translate", "--lr", "0", "--data", "."], "argument --lr: expected a learning rate in (0, 1], got 0"),
    (["translate", "--lr", "nan", "--data", "."], "argument --lr: expected a learning rate in (0, 1], got nan"),
    (["translate", "--warmup", "0", "--data", "."], "argument --warmup: expected a positive integer, got 0"),
    (["translate", "--schedule", "cosine", "--data", "."], "argument --schedule: invalid choice: 'cosine'"),
    (["translate", "--lr", "inf", "--data", "."], "argument --lr: expected a learning rate in (0, 1], got inf"),
    (["translate", "--lr", "2", "--data", "."], "argument --lr: expected a learning rate in (0, 1], got 2"),
    (["translate", "--lr=-1e-3", "--data", "."], "argument --lr: expected a learning rate in (0, 1], got -1e-3"),
    (["translate", "--lr", "fast", "--data", "."], "argument --lr: invalid _learning_rate value: 'fast'"),
    (["translate", "--warmup", "-5", "--data", "."], "argument --warmup: expected a positive integer, got -5"),
    (["translate", "--warmup", "1.5", "--data", "."], "argument --warmup: invalid _positive value: '1.5'"),
    (["translate", "--schedule", "", "--data", "."], "argument --schedule: invalid choice: ''"),
    (["copy", "--lr", "1e-3"], "unrecognized arguments: --lr 1e-3"),
    (["copy", "--threads", "0"], "argument --threads: expected a positive integer, got 0"),
    (["translate", "--threads", "-2", "--data", "."], "argument --threads: expected a positive integer, got -2"),
    (["translate", "--test-sentences", "0", "--data", "."], "argument --test-sentences: expected a positive integer"),
    (["translate", "--examples", "-1", "--data", "."], "argument --examples: expected a positive integer, got -1"),
    (["translate", "--train-pairs", "0", "--data", "."], "argument --train-pairs: expected a positive integer, got 0"),
    (["translate", "--beam-size", "0", "--data", "."], "argument --beam-size: expected a positive integer, got 0"),
    (["translate", "--max-tokens", "0", "--data", "."], "argument --max-tokens: expected a positive integer, got 0"),
    (["translate", "--vocab", "2.5", "--data", "."], "argument --vocab: invalid _positive value: '2.5'"),
    (["copy", "--batch-size", "0"], "argument --batch-size: expected a positive integer, got 0"),
    (["copy", "--d-ff", "0"], "argument --d-ff: expected a positive integer, got 0"),
    (["summary", "--dropout", "-0.1"], "argument --dropout: expected a probability in [0, 1), got -0.1"),
    (["summary", "--tgt-vocab", "0"], "argument --tgt-vocab: expected a positive integer, got 0"),
    (["copy", "--sentence", "x"], "unrecognized arguments: --sentence x"),
    (["summary", "--save", "x.pt"], "unrecognized arguments: --save x.pt"),
    (["summary", "--share-embeddings", "--tgt-vocab", "100"], "src_vocab=37000 and tgt_vocab=100"),
    (["translate", "--checkpoint", "m.pt", "--d-model", "64", "--vocab", "100"],
     "--checkpoint uses the recipe saved in m.pt: --d-model, --vocab would be ignored"),
    (["translate", "--checkpoint", "m.pt", "--train-pairs", "100"], "--train-pairs would be ignored"),
    (["copy", "--checkpoint", "m.pt", "--epochs", "3"], "--checkpoint uses the recipe saved in m.pt: --epochs would"),
    (["copy", "--resume", "m.pt", "--seed", "3", "--d-model", "64"],
     "--resume uses the recipe saved in m.pt: --d-model, --seed would be ignored (with --resume, only --device, "
     "--epochs, --precision apply)"),
    (["copy", "--checkpoint", "m.pt", "--precision", "bf16"],
     "--checkpoint uses the recipe saved in m.pt: --precision would be ignored (with --checkpoint, only --device applies)"),
    ([], "the following arguments are required: COMMAND"),
    (["train"], "invalid choice: 'train'"),
]


@pytest.mark.parametrize("argv, message", CLI, ids=[" ".join(a) or "(none)" for a, _ in CLI])
def test_the_command_line_names_what_is_wrong(argv, message):
    status, out, err = _run(argv)
    assert status == 2, (status, err)
    assert message in err, err
    assert "Traceback" not in err and "epoch" not in out                 # refused before any training


def test_a_folder_given_as_save_is_refused(tmp_path):
    status, _, err = _run(["copy", "--save", str(tmp_path)])
    assert status == 2 and "is a folder" in err


API = [
    (dict(N=100_000), "`N` must be at most 1,000, got 100,000"),
    (dict(d_model=128, h=3), "must be divisible by the number of heads h=3"),
    (dict(src_vocab=0), "`src_vocab` must be a positive integer, got 0"),
    (dict(src_vocab=10.5), "`src_vocab` must be a positive integer, got 10.5"),
    (dict(N=True), "`N` must be a positive integer, got True"),
    (dict(max_positions=10**6), "`max_positions` must be at most 100,000"),
    (dict(dropout=1.0), "`dropout` must be a probability in [0, 1)"),
    (dict(attn_dropout=-0.1), "`attn_dropout` must be a probability in [0, 1) or None"),
    (dict(padding_idx=20), "`padding_idx` must be None or a token id in [0, 10)"),
    (dict(pre_norm="yes"), "`pre_norm` must be True or False"),
    (dict(src_vocab=2_000_000, tgt_vocab=2_000_000, d_model=1024), "more than this package builds"),
]


@pytest.mark.parametrize("kwargs, message", API, ids=[str(k) for k, _ in API])
def test_make_model_names_the_argument_before_building_anything(kwargs, message):
    args = {**dict(src_vocab=10, tgt_vocab=10, N=1, d_model=16, d_ff=32, h=2), **kwargs}
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match=re.escape(message)):
        make_model(**args)
    assert torch.equal(torch.get_rng_state(), before)                    # refused before a single weight was drawn


def test_a_save_path_ending_in_a_separator_is_a_folder(tmp_path):
    from transformer_nb.files import check_save_path
    with pytest.raises(ValueError, match="is a folder"):
        check_save_path(f"{tmp_path}/newdir/", "--save")
    assert not (tmp_path / "newdir").exists()
    status, _, err = _run(["copy", "--save", f"{tmp_path}/other/"])
    assert status == 2 and "is a folder" in err and not (tmp_path / "other").exists()


def test_a_refused_command_leaves_no_folder_behind(tmp_path):
    "--save is checked first, and creates nothing: a command refused for another option leaves no folder behind."
    status, _, err = _run(["copy", "--save", f"{tmp_path}/new/sub/m.pt", "--d-model", "100000"])
    assert status == 2 and not (tmp_path / "new").exists(), err


@pytest.mark.parametrize("name", ["x" * 300, f"{'y' * 300}/m.pt"])
def test_a_save_name_too_long_for_the_file_system_is_named(tmp_path, name):
    status, _, err = _run(["copy", "--save", f"{tmp_path}/{name}"])
    assert status == 2 and "--save" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_names_the_file(tmp_path):
    import errno
    from transformer_nb.files import atomic_write

    def full_disk(f):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as e:
        atomic_write(tmp_path / "model.pt", full_disk)
    assert e.value.filename == str(tmp_path / "model.pt") and e.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def tiny_translator():
    from transformer_nb.tokenizer import Tokenizer
    tokenizer = Tokenizer.train(["ein hund läuft", "a dog runs"], vocab=None)
    torch.manual_seed(0)
    V = len(tokenizer)
    return make_model(V, V, N=1, d_model=16, d_ff=32, h=2, padding_idx=tokenizer.pad).eval(), tokenizer


@pytest.mark.parametrize("sentence, message", [
    ("", "is empty, not a string or holds control characters"),
    ("   ", "is empty, not a string or holds control characters"),
    ("ein\x00hund", "is empty, not a string or holds control characters"),
    ("\x1b[31mhund", "is empty, not a string or holds control characters"),
    (None, "is empty, not a string or holds control characters"),
    ("😀 😀", "holds no character the tokenizer knows"),
    ("ÆØÅ", "holds no character the tokenizer knows"),
])
def test_translate_refuses_what_it_cannot_read(tiny_translator, sentence, message):
    from transformer_nb.translator import translate
    model, tokenizer = tiny_translator
    with pytest.raises(ValueError, match=re.escape(message)):
        translate(model, tokenizer, ["ein hund", sentence])
    assert translate(model, tokenizer, ["ein hund"])                   # a readable sentence still goes through


def test_translate_refuses_a_tokenizer_larger_than_the_model(tiny_translator):
    from transformer_nb.translator import translate
    _, tokenizer = tiny_translator
    small = make_model(8, 8, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    with pytest.raises(ValueError, match=f"`tokenizer` has {len(tokenizer)} tokens, more than the model's vocabulary of 8"):
        translate(small, tokenizer, ["ein hund"])


def test_tokenizer_vocab_must_be_an_integer():
    from transformer_nb.tokenizer import Tokenizer
    for bad in (10.5, "40", True):
        with pytest.raises(TypeError, match="`vocab` must be an integer or None"):
            Tokenizer.train(["ein hund läuft"] * 3, vocab=bad)


@pytest.mark.parametrize("kwargs, message", [
    (dict(start_symbol=10), "`start_symbol` must be a token id in [0, 10), got 10"),
    (dict(start_symbol=-1), "`start_symbol` must be a token id in [0, 10), got -1"),
    (dict(end_symbol=99), "`end_symbol` must be a token id in [0, 10), got 99"),
    (dict(padding_idx=50), "`padding_idx` must be a token id in [0, 10), got 50"),
    (dict(end_symbol=2.0), "`end_symbol` must be a token id in [0, 10), got 2.0"),
])
@pytest.mark.parametrize("decoder", ["greedy_decode", "beam_search"])
def test_decoders_refuse_symbols_outside_the_vocabulary(kwargs, message, decoder):
    from transformer_nb import decoding
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    src = torch.tensor([[1, 5, 6, 2]])
    args = {**dict(start_symbol=1, end_symbol=2), **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        getattr(decoding, decoder)(model, src, None, 5, **args)


def test_beam_search_needs_an_end_symbol():
    from transformer_nb.decoding import beam_search
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    with pytest.raises(ValueError, match="`end_symbol` is needed"):
        beam_search(model, torch.tensor([[1, 5, 2]]), None, 5, start_symbol=1, end_symbol=None)


def test_training_refuses_no_batches_and_stops_at_a_non_finite_loss(tmp_path):
    from transformer_nb.batch import Batch
    from transformer_nb.checkpoint import read_checkpoint
    from transformer_nb.fit import train
    torch.manual_seed(0)
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    seq = torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]])
    with pytest.raises(ValueError, match="`batches` gave no batches for epoch 1"):
        train([], model, epochs=2, progress=False)
    path = tmp_path / "run.pt"

    def poison(record):                                                    # after epoch 1 is saved, weights go bad
        with torch.no_grad():
            model.generator.proj.bias[3] = float("nan")

    with pytest.raises(FloatingPointError, match="the loss is nan at step 2"):
        train([Batch(seq, seq)], model, epochs=3, save=path, on_epoch=poison, progress=False)
    assert len(read_checkpoint(path)["extra"]["history"]) == 1              # the last good checkpoint is kept


def test_training_never_replaces_a_file_it_did_not_write(tmp_path):
    "An existing file needs resume= or overwrite=True; a file another program writes there during training is kept."
    from transformer_nb.batch import Batch
    from transformer_nb.fit import train
    torch.manual_seed(0)
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    seq = torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]])
    path = tmp_path / "theirs.pt"
    path.write_bytes(b"somebody's work")
    with pytest.raises(ValueError, match="the file exists; pass resume="):
        train([Batch(seq, seq)], model, epochs=1, save=path, progress=False)
    assert path.read_bytes() == b"somebody's work"
    train([Batch(seq, seq)], model, epochs=1, save=path, overwrite=True, progress=False)    # asked for explicitly

    race = tmp_path / "race.pt"

    def second_run(record):                                               # another run saves to the same name
        race.write_bytes(b"the other run's checkpoint")

    with pytest.raises(FileExistsError, match="another program wrote this file during training"):
        train([Batch(seq, seq)], model, epochs=3, save=race, on_epoch=second_run, progress=False)
    assert race.read_bytes() == b"the other run's checkpoint"


def test_save_translator_never_replaces_a_file_unasked(tmp_path, tiny_translator):
    from transformer_nb.translator import save_translator, load_translator
    model, tokenizer = tiny_translator
    path = tmp_path / "t.pt"
    path.write_bytes(b"keep me")
    with pytest.raises(ValueError, match="the file exists; pass overwrite=True"):
        save_translator(path, model, tokenizer)
    assert path.read_bytes() == b"keep me"
    save_translator(path, model, tokenizer, overwrite=True)
    assert len(load_translator(path)[1]) == len(tokenizer)


def test_resume_keeps_the_saved_precision_unless_given(tmp_path):
    "--resume without --precision continues in the precision the run was saved with, not the command line's default."
    from transformer_nb.checkpoint import read_checkpoint
    run = str(tmp_path / "run.pt")
    assert _run(["copy", "--epochs", "1", "--precision", "bf16", "--save", run, "--examples", "1"])[0] == 0
    assert _run(["copy", "--resume", run, "--epochs", "2", "--examples", "1"])[0] == 0
    saved = read_checkpoint(run)["extra"]
    assert saved["recipe"]["precision"] == "bf16" and len(saved["history"]) == 2


def test_average_checkpoints_refuses_translators_with_other_tokenizers(tmp_path, tiny_translator):
    "Two translators of the same size whose tokenizers differ: the same id is another token, so no average."
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.checkpoint import average_checkpoints
    from transformer_nb.tokenizer import Tokenizer
    from transformer_nb.translator import save_translator
    model, tokenizer = tiny_translator
    other = Tokenizer.train(["ein hund läuft", "a dxg runs"], vocab=None)          # x for o: as many tokens
    assert len(other) == len(tokenizer) and other.state_dict() != tokenizer.state_dict()
    save_translator(tmp_path / "a.pt", model, tokenizer)
    save_translator(tmp_path / "b.pt", model, other)
    with pytest.raises(CheckpointError, match="a model with another tokenizer than .*a.pt: the same ids mean other"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    save_translator(tmp_path / "c.pt", model, tokenizer)
    average_checkpoints([tmp_path / "a.pt", tmp_path / "c.pt"])               # the same tokenizer: averaged


def test_a_checkpoint_with_integer_weights_is_refused(tmp_path):
    "All-zero integer weights would load (copied into float parameters) and give a model of zeros: refused, named."
    from transformer_nb.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
    save_checkpoint(tmp_path / "m.pt", make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0))
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    ckpt["model"] = {k: torch.zeros_like(v, dtype=torch.long) for k, v in ckpt["model"].items()}
    torch.save(ckpt, tmp_path / "int.pt")
    with pytest.raises(CheckpointError, match=r"holds torch.int64 values; the model's weights are floating point"):
        read_checkpoint(tmp_path / "int.pt")


def test_a_tiny_file_declaring_a_huge_tensor_is_refused_before_it_is_read(tmp_path):
    "A 40 kB file whose weight claims 2^34 x 16 floats (a stride-0 view): refused by its shape, nothing allocated."
    from transformer_nb.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
    save_checkpoint(tmp_path / "m.pt", make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0))
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    ckpt["model"]["encoder.layers.0.self_attn.w_qkv.weight"] = torch.zeros(1).expand(2**34, 16)
    torch.save(ckpt, tmp_path / "huge.pt")
    assert (tmp_path / "huge.pt").stat().st_size < 100_000
    with pytest.raises(CheckpointError, match=r"w_qkv.weight has shape \(17179869184, 16\), the config needs \(48, 16\)"):
        read_checkpoint(tmp_path / "huge.pt")


@pytest.mark.parametrize("alpha", [1e308, -0.5, float("nan"), float("inf"), "0.6", None, True])
def test_beam_search_names_a_length_penalty_it_cannot_use(alpha):
    "An alpha of 1e308 used to overflow in ((5 + t) / 6) ** alpha: refused, named, before decoding."
    from transformer_nb.decoding import beam_search
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    with pytest.raises(ValueError, match=re.escape(f"`length_penalty` must be a number in [0, 10], got {alpha!r}")):
        beam_search(model, torch.tensor([[1, 5, 6, 2]]), None, 5, start_symbol=1, end_symbol=2, length_penalty=alpha)


@pytest.mark.parametrize("beam_size", [0, 2.5, "3", None, True])
def test_beam_search_names_a_beam_size_it_cannot_use(beam_size):
    from transformer_nb.decoding import beam_search
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    with pytest.raises(ValueError, match=re.escape(f"`beam_size` must be a positive integer, got {beam_size!r}")):
        beam_search(model, torch.tensor([[1, 5, 6, 2]]), None, 5, start_symbol=1, end_symbol=2, beam_size=beam_size)


DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data/multi30k")
def test_a_linear_run_cannot_be_resumed_for_more_epochs(tmp_path):
    "Its learning rate reached zero at its planned last epoch: --resume with another --epochs is refused, named."
    run = str(tmp_path / "mt.pt")
    data = ["--data", str(DATA), "--train-pairs", "60", "--test-sentences", "2", "--examples", "1", "--beam-size", "1"]
    sizes = ["--N", "1", "--d-model", "16", "--d-ff", "32", "--h", "2", "--vocab", "100"]
    status, out, err = _run(["translate", *data, *sizes, "--epochs", "1", "--schedule", "linear", "--save", run])
    assert status == 0, err
    status, out, err = _run(["translate", *data, "--resume", run, "--epochs", "2"])
    assert status == 2 and f"--epochs 2: the run in {run} decays its learning rate to zero at the end of epoch 1" in err


@pytest.mark.parametrize("ema", [None, True, "0.9", 1.0, -0.5, float("nan")])
def test_train_names_an_ema_it_cannot_use(ema):
    from transformer_nb.fit import train
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    with pytest.raises(ValueError, match=re.escape(f"`ema` must be a decay in (0, 1), or 0 for none; got {ema!r}")):
        train([], model, epochs=1, ema=ema)


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "1000"])
def test_bleu_names_a_bootstrap_count_it_cannot_use(n):
    from transformer_nb.bleu import bleu
    with pytest.raises(ValueError, match=re.escape(f"`n_bootstrap` must be a positive integer, got {n!r}")):
        bleu(["a b c"], ["a b c"], n_bootstrap=n)


@pytest.mark.parametrize("saved, message", [
    (["vocab", 4000], "its recipe is a list, not a dict of TranslationRecipe fields"),
    ({"vocab": 4000}, "its recipe does not fit this version's TranslationRecipe (unknown fields: none; missing: N"),
    ({**asdict(TranslationRecipe()), "max_tokens": 0}, "m.pt: its recipe cannot be used: `max_tokens` must be an integer of at least 1, got 0"),
    ({**asdict(TranslationRecipe()), "lr": "fast"}, "m.pt: its recipe cannot be used: `lr` must be a learning rate in (0, 1], got 'fast'"),
])
def test_a_tampered_recipe_is_refused_in_one_line(tmp_path, saved, message):
    from transformer_nb.checkpoint import CheckpointError, save_checkpoint
    from transformer_nb.fit import saved_recipe
    from transformer_nb.translation_task import TranslationRecipe
    save_checkpoint(tmp_path / "m.pt", make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, padding_idx=0),
                    extra={"recipe": saved}, kind="translation")
    with pytest.raises(CheckpointError, match=re.escape(message)):
        saved_recipe(tmp_path / "m.pt", TranslationRecipe, "translation")


@pytest.fixture
def translator_file(tmp_path, tiny_translator):
    from transformer_nb.translator import save_translator
    model, tokenizer = tiny_translator
    save_translator(tmp_path / "mt.pt", model, tokenizer)
    return str(tmp_path / "mt.pt")


@pytest.mark.parametrize("sentence, message", [
    ("", "--sentence: sentence 1 ('') is empty, not a string or holds control characters"),
    ("   ", "--sentence: sentence 1 ('   ') is empty, not a string or holds control characters"),
    ("ein\x1b[31m hund", "is empty, not a string or holds control characters"),
    ("😀", "--sentence: sentence 1 ('😀') holds no character the tokenizer knows"),
])
def test_the_command_line_refuses_a_sentence_it_cannot_translate(translator_file, sentence, message):
    status, out, err = _run(["translate", "--checkpoint", translator_file, "--sentence", sentence])
    assert status == 2 and message in err and "Traceback" not in err, err


def test_a_translator_is_refused_where_a_copy_model_is_expected_and_back(tmp_path, translator_file):
    copy_model = str(tmp_path / "copy.pt")
    assert _run(["copy", "--epochs", "1", "--save", copy_model, "--examples", "1"])[0] == 0
    status, _, err = _run(["copy", "--checkpoint", translator_file])
    assert status == 2 and "a checkpoint of a translation model, not of a copy-task model" in err, err
    status, _, err = _run(["translate", "--checkpoint", copy_model, "--sentence", "ein hund"])
    assert status == 2 and "a checkpoint of a copy model, not of a translation model" in err, err
    status, _, err = _run(["translate", "--resume", copy_model, "--data", "."])
    assert status == 2 and "a checkpoint of a copy model, not of a translation model" in err, err


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True, "8"])
def test_translate_names_a_batch_size_it_cannot_use(tiny_translator, batch_size):
    from transformer_nb.translator import translate
    model, tokenizer = tiny_translator
    with pytest.raises(ValueError, match=re.escape(f"`batch_size` must be a positive integer, got {batch_size!r}")):
        translate(model, tokenizer, ["ein hund"], batch_size=batch_size)


def test_bleu_with_moses_still_checks_its_inputs():
    from transformer_nb.bleu import bleu
    with pytest.raises(ValueError, match="`hypotheses` and `references` must have equal lengths"):
        bleu(["a", "b"], ["a"], moses=True)
    with pytest.raises(ValueError, match="`hypotheses` is empty"):
        bleu([], [], moses=True)


@pytest.mark.parametrize("max_length, message", [(0, "got 0"), (-3, "got -3"), (2.5, "got 2.5"), (True, "got True")])
@pytest.mark.parametrize("decoder", ["greedy_decode", "beam_search"])
def test_decoders_name_a_max_length_they_cannot_use(max_length, message, decoder):
    from transformer_nb import decoding
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    with pytest.raises(ValueError, match=re.escape("`max_length` counts the start symbol and must be an integer of at "
                                                   f"least 1, {message}")):
        getattr(decoding, decoder)(model, torch.tensor([[1, 5, 6, 2]]), None, max_length, start_symbol=1, end_symbol=2)


@pytest.mark.parametrize("texts, message", [
    (["ein hund", 3], "got an item of type int: 3"),
    (["ein hund", None], "got an item of type NoneType: None"),
    ([b"ein hund"], "got an item of type bytes"),
])
def test_tokenizer_names_a_text_that_is_not_a_string(texts, message):
    from transformer_nb.tokenizer import Tokenizer
    with pytest.raises(TypeError, match=re.escape(f"`texts` must be a list of strings, {message}")):
        Tokenizer.train(texts, vocab=None)


RECIPE = [
    (dict(vocab=0), "`vocab` must be an integer of at least 1, got 0"),
    (dict(epochs=0), "`epochs` must be an integer of at least 1, got 0"),                # was a ZeroDivisionError
    (dict(epochs=2.5), "`epochs` must be an integer of at least 1, got 2.5"),
    (dict(drop_longer_than=0), "`drop_longer_than` must be an integer of at least 3, got 0"),             # every pair dropped
    (dict(max_tokens=True), "`max_tokens` must be an integer of at least 1, got True"),
    (dict(warmup=-1), "`warmup` must be an integer of at least 1, got -1"),
    (dict(seed=-1), "`seed` must be an integer of at least 0, got -1"),
    (dict(beam_size=0), "`beam_size` must be an integer of at least 1, got 0"),
    (dict(lr=-1.0), "`lr` must be a learning rate in (0, 1], got -1.0"),                  # trained on, silently
    (dict(lr=float("nan")), "`lr` must be a learning rate in (0, 1], got nan"),
    (dict(lr="1e-3"), "`lr` must be a learning rate in (0, 1], got '1e-3'"),
    (dict(ema=1.5), "`ema` must be a decay in (0, 1), or 0 for none, got 1.5"),
    (dict(smoothing=1.0), "`smoothing` must be a probability in [0, 1), got 1.0"),
    (dict(length_penalty=-1.0), "`length_penalty` must be a number in [0, 10], got -1.0"),
    (dict(schedule="cosine"), "`schedule` must be 'linear' or 'noam', got 'cosine'"),
    (dict(precision="fp16"), "`precision` must be one of fp32, bf16, auto, got 'fp16'"),
    (dict(device="gpu"), "`device` must be a PyTorch device such as 'cpu' or 'cuda', got 'gpu'"),
    (dict(N=0), "`N` must be a positive integer, got 0"),
    (dict(h=3), "d_model=256 must be divisible by the number of heads h=3"),
    (dict(dropout=1.5), "`dropout` must be a probability in [0, 1), got 1.5"),
    (dict(attn_dropout=-0.1), "`attn_dropout` must be a probability in [0, 1) or None, got -0.1"),
    (dict(pre_norm="yes"), "`pre_norm` must be True or False, got 'yes'"),
]


@pytest.mark.parametrize("fields, message", RECIPE, ids=[str(f) for f, _ in RECIPE])
def test_a_translation_recipe_names_a_field_it_cannot_use(fields, message):
    "Checked when the recipe is made (before seconds of tokenizer training), also by `dataclasses.replace`."
    import dataclasses
    from transformer_nb.translation_task import TranslationRecipe
    with pytest.raises(ValueError, match=re.escape(message)):
        TranslationRecipe(**fields)
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(TranslationRecipe(), **fields)


@pytest.mark.parametrize("call, error, message", [
    (lambda t, c: t(c, [("ein hund", "a dog")], []), ValueError, "`val_pairs` is empty"),   # was val loss 0.0
    (lambda t, c: t(c, [], [("ein hund", "a dog")]), ValueError, "`train_pairs` is empty: nothing to train on"),
    (lambda t, c: t(c, ["ab", "cd"], [("ein hund", "a dog")]), TypeError,                     # trained on letters
     "`train_pairs[0]` must be a (source, target) pair of strings, got 'ab'"),
    (lambda t, c: t(c, [("ein hund", "a dog", "x")], [("a", "b")]), TypeError, "`train_pairs[0]` must be a (source"),
    (lambda t, c: t(c, [("ein hund", "a dog")], [("a", None)]), TypeError, "`val_pairs[0]` must be a (source"),
    (lambda t, c: t({"epochs": 1}, [("a", "b")], [("a", "b")]), TypeError, "`recipe` must be a TranslationRecipe, got dict"),
])
def test_train_translation_names_data_it_cannot_use(call, error, message):
    from transformer_nb.translation_task import TranslationRecipe, train_translation
    with pytest.raises(error, match=re.escape(message)):
        call(train_translation, TranslationRecipe(vocab=40, N=1, d_model=16, d_ff=32, h=2, epochs=1))


@pytest.mark.parametrize("ids, message", [
    ([5, 99], "got 99"), ([-1], "got -1"), ([1.5], "got 1.5"), ([True], "got True"), ([[5, 6]], "got [5, 6]"),
])
def test_tokenizer_decode_refuses_ids_outside_its_vocabulary(tiny_translator, ids, message):
    "An id outside the vocabulary used to become <unk> silently, and a string a TypeError naming nothing."
    _, tokenizer = tiny_translator
    with pytest.raises(ValueError, match=re.escape(f"`ids` must be token ids, integers in [0, {len(tokenizer)}), {message}")):
        tokenizer.decode(ids)
    assert tokenizer.decode(torch.tensor([tokenizer.bos, 5, tokenizer.eos])) == tokenizer.decode([5])


@pytest.mark.parametrize("state, message", [
    ({}, "a tokenizer state is a dict with 'alphabet' and 'merges'"),
    ([], "a tokenizer state is a dict with 'alphabet' and 'merges'"),
    ({"alphabet": [1, 2], "merges": []}, "a tokenizer's 'alphabet' is a list of single characters, got list [1, 2]"),
    ({"alphabet": ["ab"], "merges": []}, "a tokenizer's 'alphabet' is a list of single characters"),
    ({"alphabet": ["a", "b"], "merges": [["a", "c"]]}, "a tokenizer's merge 0 must join two pieces known before it"),
    ({"alphabet": ["a", "b"], "merges": [["a", "b"], ["ab"]]}, "a tokenizer's merge 1 must join two pieces"),
])
def test_a_tampered_tokenizer_state_is_refused(tmp_path, tiny_translator, state, message):
    "Directly, and inside a translator file (one line naming the file): an alphabet of integers used to load."
    from transformer_nb.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
    from transformer_nb.tokenizer import Tokenizer
    from transformer_nb.translator import load_translator, save_translator
    with pytest.raises(ValueError, match=re.escape(message)):
        Tokenizer.from_state_dict(state)
    model, tokenizer = tiny_translator
    save_translator(tmp_path / "good.pt", model, tokenizer)
    extra = {**read_checkpoint(tmp_path / "good.pt")["extra"], "tokenizer": state}
    save_checkpoint(tmp_path / "bad.pt", model, extra=extra, kind="translation")
    with pytest.raises(CheckpointError, match=re.escape(f"its tokenizer is malformed: {message}")):
        load_translator(tmp_path / "bad.pt")
    assert load_translator(tmp_path / "good.pt")[1].state_dict() == tokenizer.state_dict()


@pytest.mark.parametrize("call, error, message", [
    (lambda e, b: e([("ein", "a")], 0), ValueError, "`drop_longer_than` must be None or an integer of at least 3"),
    (lambda e, b: e([("ein", "a")], 2.5), ValueError, "`drop_longer_than` must be None or an integer of at least 3"),
    (lambda e, b: e("ab", None), TypeError, "`pairs` must be a list of (source, target) pairs of strings, got str"),
    (lambda e, b: e([("ein", "a", "b")], None), TypeError, "`pairs[0]` must be a (source, target) pair of strings"),
    (lambda e, b: b([([1, 5, 2], [1, 6, 2])], 2.5), ValueError, "`max_tokens` must be a positive integer, got 2.5"),
    (lambda e, b: b([([1, 5, 2], [1, 6, 2])], 0), ValueError, "`max_tokens` must be a positive integer, got 0"),
    (lambda e, b: b([([1, 5, 2], [1, 6, 2])], 100, seed="x"), TypeError, "`seed` must be an integer, got 'x'"),
])
def test_pairs_and_batches_name_what_they_cannot_use(tiny_translator, call, error, message):
    from transformer_nb.data import bucket_batches, bucket_count, encode_pairs
    _, tokenizer = tiny_translator
    with pytest.raises(error, match=re.escape(message)):
        call(lambda pairs, longest: encode_pairs(pairs, tokenizer, longest), bucket_batches)


@pytest.mark.parametrize("hypotheses, references, message", [
    ("a dog", "a dog", "`hypotheses` must be a list of sentences, got a single string"),    # scored letter by letter
    (["a dog"], "a dog", "`references` must be a list of sentences, got a single string"),
    ([None], ["a dog"], "`hypotheses[0]` must be a string, got NoneType"),
    (["a dog"], [["a dog"]], "`references[0]` must be a string, got list"),
])
def test_bleu_names_texts_it_cannot_score(hypotheses, references, message):
    from transformer_nb.bleu import bleu
    with pytest.raises(TypeError, match=re.escape(message)):
        bleu(hypotheses, references)


@pytest.mark.parametrize("args, error, message", [
    (dict(beam_size=2.5), ValueError, "`beam_size` must be a positive integer (1: greedy), got 2.5"),
    (dict(beam_size=0), ValueError, "`beam_size` must be a positive integer (1: greedy), got 0"),
    (dict(model=None), TypeError, "`model` must be a model built by make_model (or load_translator), got NoneType"),
    (dict(tokenizer="bpe"), TypeError, "`tokenizer` must be a Tokenizer, got str"),
])
def test_translate_names_a_model_tokenizer_or_beam_it_cannot_use(tiny_translator, args, error, message):
    from transformer_nb.translator import translate
    model, tokenizer = tiny_translator
    kwargs = {**dict(model=model, tokenizer=tokenizer, sentences=["ein hund"]), **args}
    with pytest.raises(error, match=re.escape(message)):
        translate(**kwargs)


def test_save_translator_names_a_missing_tokenizer_before_writing(tmp_path, tiny_translator):
    from transformer_nb.translator import save_translator
    model, _ = tiny_translator
    with pytest.raises(TypeError, match="`tokenizer` must be a Tokenizer, got NoneType"):
        save_translator(tmp_path / "t.pt", model, None)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_is_not_read_as_a_checkpoint(tmp_path):
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.translator import load_translator
    with pytest.raises(CheckpointError, match=re.escape(f"{tmp_path}: not a transformer-nb checkpoint (a folder, not a file)")):
        load_translator(tmp_path)


@pytest.mark.parametrize("fields, message", [
    (dict(vocab=3), "`vocab` must be an integer of at least 4, got 3"),
    (dict(min_symbols=5, max_symbols=3), "`max_symbols` must be an integer of at least 5, got 3"),
    (dict(batches_per_epoch=0), "`batches_per_epoch` must be an integer of at least 1, got 0"),
    (dict(lr=0.0), "`lr` must be a learning rate in (0, 1], got 0.0"),
    (dict(target_accuracy=100), "`target_accuracy` must be a fraction in (0, 1], got 100"),      # a percentage
    (dict(smoothing=float("nan")), "`smoothing` must be a probability in [0, 1), got nan"),
    (dict(h=5), "d_model=32 must be divisible by the number of heads h=5"),
    (dict(device="tpu:0"), "`device` must be a PyTorch device such as 'cpu' or 'cuda', got 'tpu:0'"),
])
def test_a_copy_recipe_names_a_field_it_cannot_use(fields, message):
    from transformer_nb.copy_task import CopyRecipe
    with pytest.raises(ValueError, match=re.escape(message)):
        CopyRecipe(**fields)


@pytest.mark.parametrize("entry, value, message", [
    ("rng_state", torch.zeros(3, dtype=torch.uint8), "a malformed random-number state"),      # was a RuntimeError
    ("rng_state", "abc", "it holds no random-number state to resume from"),
    ("train_state", {"batches": "x"}, "a malformed train_state"),                                # was a TypeError
    ("train_state", {"epochs": 3}, "a malformed train_state"),                                # no such count
    ("optimizer", {"state": {}, "param_groups": "x"}, "its optimizer state does not fit"),
])
def test_resume_names_a_malformed_run_state(tmp_path, entry, value, message):
    "A resume file whose random state, step counts or optimizer state were damaged: one line naming the file."
    from transformer_nb.batch import Batch
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.fit import train
    torch.manual_seed(0)
    seq = torch.randint(3, 10, (4, 6))
    seq[:, 0] = 1
    fresh = lambda: make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    train([Batch(seq, seq, padding_idx=0)], fresh(), epochs=1, save=tmp_path / "run.pt", progress=False)
    ckpt = torch.load(tmp_path / "run.pt", weights_only=True)
    torch.save({**ckpt, entry: value}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=re.escape(message)) as e:
        train([Batch(seq, seq, padding_idx=0)], fresh(), epochs=2, resume=tmp_path / "bad.pt", save=tmp_path / "bad.pt",
              progress=False)
    assert "bad.pt" in str(e.value)


def test_a_recipe_names_a_count_too_large_and_a_file_without_extra(tmp_path):
    "A seed of 2**70 names its limit; a checkpoint saved without `extra` is refused for resume in one line."
    from transformer_nb.checkpoint import CheckpointError, save_checkpoint
    from transformer_nb.copy_task import CopyRecipe, train_copy
    with pytest.raises(ValueError, match=re.escape("`seed` must be below 2**63, got 1,180,591,620,717,411,303,424")):
        TranslationRecipe(seed=2**70)
    save_checkpoint(tmp_path / "bare.pt", make_model(11, 11, N=1, d_model=32, d_ff=64, h=4, padding_idx=0), kind="copy")
    with pytest.raises(CheckpointError, match="a model without its training run"):   # was an AttributeError
        train_copy(CopyRecipe(epochs=2), resume=tmp_path / "bare.pt")


def test_ctrl_c_while_translating_says_so_and_exits_130(translator_file, monkeypatch):
    "No KeyboardInterrupt traceback: one line, exit status 130 (the shell's code for Ctrl-C)."
    from transformer_nb import commands

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(commands, "translate", interrupted)
    status, _, err = _run(["translate", "--checkpoint", translator_file, "--sentence", "ein hund"])
    assert status == 130 and "interrupted while translating: nothing more to keep" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("history", ["abc", [{"epoch": 1}, {"epoch": 3}], None])
def test_resume_refuses_a_history_that_is_not_one_record_per_epoch(tmp_path, history):
    "history='abc' used to make resume believe 3 epochs were done, train nothing and print 'saved'."
    from transformer_nb.batch import Batch
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.fit import train
    torch.manual_seed(0)
    seq = torch.randint(3, 10, (4, 6))
    seq[:, 0] = 1
    fresh = lambda: make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    train([Batch(seq, seq, padding_idx=0)], fresh(), epochs=1, save=tmp_path / "run.pt", progress=False)
    ckpt = torch.load(tmp_path / "run.pt", weights_only=True)
    torch.save({**ckpt, "extra": {**ckpt["extra"], "history": history}}, tmp_path / "bad.pt")
    before = (tmp_path / "bad.pt").read_bytes()
    with pytest.raises(CheckpointError, match=re.escape("no history (one record per epoch)")):
        train([Batch(seq, seq, padding_idx=0)], fresh(), epochs=3, resume=tmp_path / "bad.pt", save=tmp_path / "bad.pt",
              progress=False)
    assert (tmp_path / "bad.pt").read_bytes() == before                 # the user's file is untouched


def test_resume_to_an_epoch_already_done_is_refused_not_claimed_saved(tmp_path):
    "It used to print 'saved the model to new.pt', exit 0, and write nothing."
    tiny = ["--N", "1", "--d-model", "16", "--d-ff", "32", "--h", "2", "--examples", "1", "--threads", "1"]
    assert _run(["copy", "--epochs", "2", "--save", str(tmp_path / "run.pt"), *tiny])[0] == 0
    before = (tmp_path / "run.pt").read_bytes()
    status, out, err = _run(["copy", "--resume", str(tmp_path / "run.pt"), "--epochs", "2", "--save",
                             str(tmp_path / "new.pt"), "--examples", "1", "--threads", "1"])
    assert status == 2 and "--epochs 2: the run in" in err and "has already trained 2 epochs" in err, err
    assert "saved" not in out and not (tmp_path / "new.pt").exists()
    assert (tmp_path / "run.pt").read_bytes() == before


@pytest.mark.parametrize("argv, message", [
    (["translate", "--data", str(DATA), "--train-pairs", "50", "--vocab", "5", "--epochs", "1"],
     "--vocab 5: `vocab` must be at least"),                                     # was a traceback
    (["translate", "--data", str(DATA), "--epochs", "100000000"], "`epochs` must be at most 1,000"),   # was a hang
    (["copy", "--save", "/dev/null", "--epochs", "1"], "--save /dev/null: not a regular file"),   # was a traceback
    (["copy", "--checkpoint", "/dev/null"], "--checkpoint /dev/null: not a regular file"),
])
def test_the_command_line_names_what_the_recipe_or_a_path_refuses(argv, message):
    status, out, err = _run(argv)
    assert status == 2 and message in err and "Traceback" not in err, err


def test_a_damaged_data_file_is_named(tmp_path):
    import shutil
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    with open(tmp_path / "val.en.gz", "ab") as f:
        f.write(b"x")
    status, _, err = _run(["translate", "--data", str(tmp_path), "--train-pairs", "50", "--epochs", "1"])
    assert status == 2 and f"--data {tmp_path}:" in err and "Traceback" not in err, err


@pytest.mark.parametrize("overwrite", ["no", 0, None])
def test_save_translator_overwrite_must_be_true_or_false(tmp_path, tiny_translator, overwrite):
    "overwrite='no' used to count as true and replaced a resumable run with a bare translator."
    from transformer_nb.translator import save_translator
    model, tokenizer = tiny_translator
    save_translator(tmp_path / "t.pt", model, tokenizer)
    before = (tmp_path / "t.pt").read_bytes()
    with pytest.raises(TypeError, match=re.escape(f"`overwrite` must be True or False, got {overwrite!r}")):
        save_translator(tmp_path / "t.pt", model, tokenizer, overwrite=overwrite)
    assert (tmp_path / "t.pt").read_bytes() == before


@pytest.mark.parametrize("map_location, message", [
    ("tpu", "`map_location` must be a device such as 'cpu' or 'cuda', got 'tpu'"),
    ("banana", "`map_location` must be a device such as 'cpu' or 'cuda', got 'banana'"),
] + ([] if torch.cuda.is_available() else [("cuda", "`map_location` 'cuda': CUDA is not available on this machine")]))
def test_a_bad_map_location_is_named_not_blamed_on_the_file(translator_file, map_location, message):
    "It used to say the (good) file was truncated or damaged."
    from transformer_nb.translator import load_translator
    with pytest.raises(ValueError, match=re.escape(message)):
        load_translator(translator_file, map_location=map_location)


def test_translate_reads_a_generator_and_refuses_del(tiny_translator):
    "A generator was used up by the checks and translated to []; DEL (and C1 controls) passed the control check."
    from transformer_nb.translator import translate
    model, tokenizer = tiny_translator
    assert len(translate(model, tokenizer, (s for s in ["ein hund", "hund"]))) == 2
    for bad in ("ein\x7fhund", "ein\x85hund"):
        with pytest.raises(ValueError, match="holds control characters"):
            translate(model, tokenizer, [bad])


def test_copy_batch_size_has_a_limit():
    "--batch-size 1000000 was killed for memory with no message."
    from transformer_nb.copy_task import CopyRecipe
    with pytest.raises(ValueError, match=re.escape("`batch_size` must be at most 65,536, got 1,000,000")):
        CopyRecipe(batch_size=10**6)
    status, _, err = _run(["copy", "--batch-size", "1000000"])
    assert status == 2 and "`batch_size` must be at most 65,536" in err, err


@pytest.mark.parametrize("call, message", [
    (lambda: masks.subsequent_mask(2.5), "`size` must be a length in [0, 100,000], got 2.5"),
    (lambda: masks.subsequent_mask(10**6), "`size` must be a length in [0, 100,000]"),
    (lambda: masks.padding_mask(torch.ones(2, 3, dtype=torch.long), None),
     "`padding_idx` must be the pad token's id, an integer, got None"),
    (lambda: masks.length_mask([True, False]), "`lengths` must be a 1-D integer tensor"),
    (lambda: masks.keep_to_additive(torch.ones(1, 2, dtype=torch.bool), torch.long),
     "`dtype` must be a floating-point dtype"),
])
def test_masks_name_an_argument_they_cannot_use(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize("src", [[[1, 5, 2]], None])
def test_decoders_name_a_source_that_is_not_a_tensor(src):
    from transformer_nb.decoding import beam_search, greedy_decode
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2).eval()
    for decode in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match="`src` must be a \\(batch, len_src\\) tensor of token ids, got"):
            decode(model, src, None, 5, start_symbol=1, end_symbol=2)


def test_average_checkpoints_names_a_single_path():
    from transformer_nb.checkpoint import average_checkpoints
    with pytest.raises(TypeError, match="got the single path 'model.pt': wrap it in a list"):
        average_checkpoints("model.pt")


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(accum_iter=2.5), ValueError, "`accum_iter` must be a positive integer, got 2.5"),
    (dict(accum_iter=0), ValueError, "`accum_iter` must be a positive integer, got 0"),
    (dict(on_epoch=5), TypeError, "`on_epoch` must be a function or None, got 5"),
    (dict(evaluate="bleu"), TypeError, "`evaluate` must be a function or None, got 'bleu'"),
    (dict(evaluate=lambda m: [1.0]), TypeError, "`evaluate` must return a dict of numbers (Python's or NumPy's), got [1.0]"),
])
def test_train_names_an_argument_it_cannot_use(kwargs, error, message):
    from transformer_nb.copy_task import copy_batches
    from transformer_nb.fit import train
    model = make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    batches = copy_batches(2, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(error, match=re.escape(message)):
        train(list(batches), model, epochs=1, **kwargs)


# ---- a third round: the API's remaining silent acceptances and tracebacks ----

def _small():
    torch.manual_seed(0)
    return make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, dropout=0.0, padding_idx=0).eval()


def _api_cases():
    from transformer_nb.batch import Batch
    from transformer_nb.bleu import bleu
    from transformer_nb.checkpoint import save_checkpoint
    from transformer_nb.copy_task import CopyRecipe, copy_accuracy, train_copy
    from transformer_nb.data import bucket_batches, bucket_count, encode_pairs
    from transformer_nb.decoding import beam_search, greedy_decode
    from transformer_nb.masks import length_mask
    from transformer_nb.tokenizer import Tokenizer
    tok = Tokenizer.train(["ein hund läuft", "a dog runs"] * 3, 30)
    src, tiny = torch.tensor([[1, 5, 6, 2]]), CopyRecipe(epochs=1, batches_per_epoch=1)
    sm, empty = (src != 0).unsqueeze(1), torch.zeros(1, 0, dtype=torch.long)
    long_ids = lambda *shape: torch.zeros(*shape, dtype=torch.long)
    return [
        ("min_frequency 0", lambda: Tokenizer.train(["a b"], 10, min_frequency=0), ValueError, "`min_frequency` must be an integer of at least 1"),
        ("min_frequency 1.5", lambda: Tokenizer.train(["a b"], 10, min_frequency=1.5), ValueError, "`min_frequency` must be an integer of at least 1"),
        ("min_frequency '2'", lambda: Tokenizer.train(["a b"], None, min_frequency="2"), ValueError, "got '2'"),
        ("encode bos='yes'", lambda: tok.encode("a dog", bos="yes"), TypeError, "`bos` and `eos` must be True or False, got bos='yes'"),
        ("encode bos=5", lambda: tok.encode("a dog", bos=5), TypeError, "got bos=5"),
        ("encode eos=None", lambda: tok.encode("a dog", eos=None), TypeError, "eos=None"),
        ("save_checkpoint kind=3", lambda: save_checkpoint("never.pt", _small(), kind=3), ValueError, "`kind` must be a non-empty string"),
        ("save_checkpoint kind=''", lambda: save_checkpoint("never.pt", _small(), kind=""), ValueError, "got ''"),
        ("train_copy(dict)", lambda: train_copy({"epochs": 1}), TypeError, "`recipe` must be a CopyRecipe, got dict"),
        ("held_out list", lambda: train_copy(tiny, held_out=[[1, 2]]), ValueError, "`held_out` must be a (n >= 1, width) tensor of token ids, got list"),
        ("held_out floats", lambda: train_copy(tiny, held_out=torch.rand(4, 12)), ValueError, "got shape (4, 12), torch.float32"),
        ("held_out empty", lambda: train_copy(tiny, held_out=long_ids(0, 12)), ValueError, "got shape (0, 12)"),
        ("copy_accuracy 1-D", lambda: copy_accuracy(_small(), long_ids(12)), ValueError, "`seqs` must be a (n >= 1, width) tensor"),
        ("encode_pairs None", lambda: encode_pairs([("a", "b")], None), TypeError, "`tokenizer` must be a Tokenizer, got NoneType"),
        ("encode_pairs str", lambda: encode_pairs([("a", "b")], "tok"), TypeError, "got str"),
        ("bucket_batches ints", lambda: bucket_batches([1, 2], 100), TypeError, "`examples[0]` must be a (source ids, target ids) pair"),
        ("bucket_batches text", lambda: bucket_batches([([1, 5, 2], [1, 6, 2]), ("a", "b")], 100), TypeError, "`examples[1]`"),
        ("bucket_batches empty sides", lambda: bucket_batches([([], [])], 100), TypeError, "a target of at least 2"),
        ("bucket_batches target of 1", lambda: bucket_batches([([1], [1])], 100), TypeError, "`examples[0]`"),
        ("bucket_batches int", lambda: bucket_batches(5, 100), TypeError, "`examples` must be a list of (source ids, target ids) pairs, got int"),
        ("bucket_count budget", lambda: bucket_count([([1, 5, 2], [1, 6, 2])], 0), ValueError, "`max_tokens` must be a positive integer, got 0"),
        ("bucket_count ints", lambda: bucket_count([1, 2], 100), TypeError, "`examples[0]` must be a (source ids, target ids) pair"),
        ("Batch list", lambda: Batch([[1, 2]]), ValueError, "`src` must be a (batch, len) tensor of token ids (torch.long), got list"),
        ("Batch floats", lambda: Batch(torch.rand(2, 3)), ValueError, "got shape (2, 3) and dtype torch.float32"),
        ("Batch float target", lambda: Batch(long_ids(2, 3), torch.rand(2, 3)), ValueError, "`tgt` must be a (batch=2, len >= 2) tensor of token ids"),
        ("greedy no source tokens", lambda: greedy_decode(_small(), empty, None, 5, 1, 2), ValueError, "`src` has no tokens (len_src = 0)"),
        ("beam no source tokens", lambda: beam_search(_small(), empty, None, 5, 1, 2), ValueError, "`src` has no tokens"),
        ("greedy start == end", lambda: greedy_decode(_small(), src, sm, 5, 2, 2), ValueError, "`start_symbol` and `end_symbol` must differ, got 2 for both"),
        ("beam start == end", lambda: beam_search(_small(), src, sm, 5, 2, 2), ValueError, "must differ"),
        ("greedy use_cache='no'", lambda: greedy_decode(_small(), src, sm, 5, 1, 2, use_cache="no"), TypeError, "`use_cache` must be True or False, got 'no'"),
        ("beam use_cache=1", lambda: beam_search(_small(), src, sm, 5, 1, 2, use_cache=1), TypeError, "`use_cache` must be True or False, got 1"),
        ("beam return_scores='x'", lambda: beam_search(_small(), src, sm, 5, 1, 2, return_scores="x"), TypeError, "`return_scores` must be True or False"),
        ("length_mask strings", lambda: length_mask(["a"]), ValueError, "`lengths` must be one integer length per sequence, got ['a']"),
        ("length_mask 2-D", lambda: length_mask([[1]]), ValueError, "`lengths` must be a 1-D integer tensor"),
        ("bleu generator of numbers", lambda: bleu((x for x in [1]), ["a"]), TypeError, "`hypotheses[0]` must be a string, got int"),
    ]


@pytest.mark.parametrize("case", range(len(_api_cases())), ids=[c[0] for c in _api_cases()])
def test_the_api_names_the_argument_it_cannot_use(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, call, error, message = _api_cases()[case]
    with pytest.raises(error, match=re.escape(message)):
        call()
    assert not list(tmp_path.iterdir())                                 # nothing written


def test_what_is_valid_beside_them_still_works():
    from transformer_nb.bleu import bleu
    from transformer_nb.masks import length_mask
    assert round(bleu((s for s in ["a dog runs fast"]), iter(["a dog runs fast"])).score, 6) == 100   # any iterable
    assert length_mask([]).shape == (0, 1, 0)                           # no sequences: an empty mask


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    from transformer_nb.copy_task import CopyRecipe, train_copy
    path = tmp_path_factory.mktemp("run") / "base.pt"
    train_copy(CopyRecipe(epochs=1, batches_per_epoch=2), save=path, progress=False)
    return torch.load(path, weights_only=True)


def _put(*keys_and_value):
    "A change to a checkpoint dict: the value at the path of keys (the last item is the value)."
    *keys, value = keys_and_value

    def change(ckpt):
        target = ckpt
        for k in keys[:-1]:
            target = target[k]
        if value is _put:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return change


TAMPERED = [
    ("optimizer a string", _put("optimizer", "abc"), "its optimizer state does not fit this run (the state has other entries)"),
    ("optimizer lr a string", _put("optimizer", "param_groups", 0, "lr", "x"), "['param_groups'][0]['lr'] is 'x'"),
    ("optimizer betas a string", _put("optimizer", "param_groups", 0, "betas", "x"), "['betas'] is not a list of 2"),
    ("optimizer moment of another shape", _put("optimizer", "state", 0, "exp_avg", torch.zeros(3)), "parameter 0's exp_avg has shape (3,), not (96, 32)"),
    ("optimizer step a string", _put("optimizer", "state", 0, "step", "x"), "its optimizer state does not fit this run"),
    ("optimizer moment missing", _put("optimizer", "state", 3, "exp_avg_sq", _put), "(parameter 3's state has no exp_avg_sq)"),
    ("optimizer moment None", _put("optimizer", "state", 1, "exp_avg", None), "parameter 1's exp_avg is a NoneType, not a Tensor"),
    ("optimizer moment a number", _put("optimizer", "state", 1, "exp_avg_sq", 0.0), "parameter 1's exp_avg_sq is a float, not a Tensor"),
    ("extra a list", _put("extra", [1, 2]), "its `extra` is a list, not a dict"),
    ("scheduler a list", _put("scheduler", [1]), "its scheduler state does not fit this run"),
    ("scheduler at step -100", _put("scheduler", "last_epoch", -100), "its scheduler stands at step -100, its train_state at 2"),
    ("scheduler base_lrs a string", _put("scheduler", "base_lrs", "x"), "['base_lrs'] is not a list of 1"),
    ("model key not a name", _put("model", 0, torch.zeros(1)), "`model` has a key 0 that is not a name"),
    ("history empty", _put("extra", "history", []), "its history (0 epochs, to step 0) and its train_state (step 2) disagree"),
    ("history loss a string", _put("extra", "history", 0, "loss", "x"), "epoch 1 of its history has no number for 'loss'"),
    ("history seconds None", _put("extra", "history", 0, "seconds", None), "has no number for 'seconds'"),
    ("history without seconds", _put("extra", "history", 0, "seconds", _put), "has no number for 'seconds'"),
    ("history accuracy a string", _put("extra", "history", 0, "accuracy", "x"), "has no number for 'accuracy'"),
    ("train_state ahead of history", _put("train_state", "steps", 999), "and its train_state (step 999) disagree"),
    ("train_state missing", _put("train_state", _put), "a malformed train_state: no step to resume from (steps None)"),
    ("optimizer lr too large for a float", _put("optimizer", "param_groups", 0, "lr", 10**400), "['lr'] is 1000000"),
    ("recipe d_model not the model's", _put("extra", "recipe", "d_model", 64), "its model is not the one its recipe builds: d_model=32 (its recipe: 64)"),
    ("recipe vocab not the model's", _put("extra", "recipe", "vocab", 20), "src_vocab=11 (its recipe: 20)"),
    ("model padding_idx changed", _put("config", "padding_idx", 5), "padding_idx=5 (its recipe: 0)"),
    ("model tie_weights flipped", _put("config", "tie_weights", True), "tie_weights=True (its recipe: False)"),
]


@pytest.mark.parametrize("change, message", [c[1:] for c in TAMPERED], ids=[c[0] for c in TAMPERED])
def test_a_tampered_run_is_refused_in_one_line_before_training(tmp_path, copy_run, change, message):
    import copy
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.copy_task import CopyRecipe, train_copy
    ckpt = copy.deepcopy(copy_run)
    change(ckpt)
    torch.save(ckpt, tmp_path / "run.pt")
    before = (tmp_path / "run.pt").read_bytes()
    with pytest.raises(CheckpointError, match=re.escape(message)):
        train_copy(CopyRecipe(epochs=2, batches_per_epoch=2), resume=tmp_path / "run.pt", progress=False)
    assert (tmp_path / "run.pt").read_bytes() == before


REFUSED_WHILE_LOADING = [                        # refusals that used to come after the model was already loaded
    ("optimizer moment missing", _put("optimizer", "state", 3, "exp_avg_sq", _put), {}, "parameter 3's state has no exp_avg_sq"),
    ("scheduler base_lrs a string", _put("scheduler", "base_lrs", "x"), {}, "['base_lrs'] is not a list of 1"),
    ("rng state of the wrong size", _put("rng_state", torch.zeros(3, dtype=torch.uint8)), {"restore_rng": True},
     "a malformed random-number state"),
    ("train_state negative", _put("train_state", "steps", -1), {}, "a malformed train_state"),
    ("GPU random state not bytes", _put("cuda_rng_state", [torch.zeros(16, dtype=torch.uint8), "x"]),
     {"restore_rng": True}, "a malformed random-number state for the GPUs (cuda_rng_state)"),
]


def _same(a, b) -> bool:
    "Equal nested states: tensors by value, the rest by ==."
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("change, options, message", [c[1:] for c in REFUSED_WHILE_LOADING],
                         ids=[c[0] for c in REFUSED_WHILE_LOADING])
def test_a_refused_checkpoint_leaves_what_it_was_loaded_into_unchanged(tmp_path, copy_run, change, options, message):
    """load_checkpoint changes nothing until every part of the file has passed: after a refusal, the model's weights,
    the optimizer's and the scheduler's states and the CPU's random state are those from before the call (a fresh
    run's: an optimizer that has not stepped is what the late checks compare against)."""
    import copy
    from transformer_nb.checkpoint import CheckpointError
    from transformer_nb.model import ModelConfig
    from transformer_nb.resume import load_checkpoint
    from transformer_nb.schedule import noam_optimizer
    torch.manual_seed(1)
    model = make_model(ModelConfig(**copy_run["config"]))
    optimizer, scheduler = noam_optimizer(model)
    before = copy.deepcopy([model.state_dict(), optimizer.state_dict(), scheduler.state_dict(), torch.get_rng_state()])
    ckpt = copy.deepcopy(copy_run)
    change(ckpt)
    torch.save(ckpt, tmp_path / "run.pt")
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_checkpoint(tmp_path / "run.pt", model, optimizer, scheduler, **options)
    after = [model.state_dict(), optimizer.state_dict(), scheduler.state_dict(), torch.get_rng_state()]
    for what, old, new in zip(["model", "optimizer", "scheduler", "random state"], before, after):
        assert _same(old, new), f"the refused file changed the {what}"
    torch.save(copy_run, tmp_path / "good.pt")                         # the untampered file does change them
    load_checkpoint(tmp_path / "good.pt", model, optimizer, scheduler)
    assert _same(model.state_dict(), copy_run["model"]) and not _same(model.state_dict(), before[0])


def test_the_untampered_run_resumes(tmp_path, copy_run):
    from transformer_nb.copy_task import CopyRecipe, train_copy
    torch.save(copy_run, tmp_path / "run.pt")
    history = train_copy(CopyRecipe(epochs=2, batches_per_epoch=2), resume=tmp_path / "run.pt", progress=False).history
    assert [r["epoch"] for r in history] == [1, 2]


def test_train_refuses_scores_that_are_not_numbers():
    from transformer_nb.copy_task import CopyRecipe
    from transformer_nb.fit import train
    with pytest.raises(TypeError, match=re.escape("`evaluate` must return a dict of numbers (Python's or NumPy's), got {'bleu': '30'}")):
        train(lambda e: CopyRecipe(batches_per_epoch=1).batches(e), _small(), epochs=1, progress=False,
              evaluate=lambda m: {"bleu": "30"})


def test_a_copy_recipe_with_nothing_to_draw_is_refused_not_a_hang():
    "With 1 content symbol and at most 3 of them, every sequence is reserved: training has nothing to draw."
    from transformer_nb.copy_task import CopyRecipe, train_copy, _copy_sequences
    recipe = CopyRecipe(vocab=4, max_symbols=3, epochs=1, batches_per_epoch=1)
    with pytest.raises(ValueError, match=re.escape("vocab=4, min_symbols=1, max_symbols=3: 1,000 rounds found fewer "
                                                   f"than {recipe.batch_size} unreserved sequences")):
        train_copy(recipe, progress=False)
    assert len(_copy_sequences(5, vocab=4, max_symbols=3, reserved_only=True)) == 5     # the reserved ones exist


def test_copy_sequences_refuse_an_empty_request():
    "n=0 reached torch.cat([]) and its message about an empty list."
    from transformer_nb.copy_task import _copy_sequences, held_out_set
    for call in (lambda: _copy_sequences(0), lambda: held_out_set(n=0)):
        with pytest.raises(ValueError, match=re.escape("need n >= 1, vocab >= 4 and 1 <= min_symbols <= max_symbols, "
                                                       "got n=0")):
            call()


def test_every_seed_the_copy_recipe_accepts_trains():
    "A seed of about 2e14 or more passed the recipe's check, then overflowed the epoch's generator seed."
    from transformer_nb.copy_task import CopyRecipe, train_copy
    history = train_copy(CopyRecipe(seed=2**63 - 1, epochs=1, batches_per_epoch=1), progress=False).history
    assert len(history) == 1


def test_decode_names_a_wrong_src_mask():
    "decode checked tgt_mask but not src_mask: a wrong one was reported as `mask` from inside a layer."
    from transformer_nb.model import make_model
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)
    src, tgt = torch.tensor([[1, 5, 2]]), torch.tensor([[1]])
    memory = model.encode(src, torch.ones(1, 1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=re.escape("`src_mask` of shape (1, 1, 4) does not broadcast to (1, 1, 3)")):
        model.decode(memory, torch.ones(1, 1, 4, dtype=torch.bool), tgt, None)


def test_a_data_folder_without_the_multi30k_files_is_named_in_the_commands_words(tmp_path):
    "The command line speaks in its options: no `root=None` (an argument of load_multi30k) in what it prints."
    status, _, err = _run(["translate", "--data", str(tmp_path)])
    assert status == 2 and "train.de.gz" in err and "leave --data out to download them" in err and "root=" not in err


def test_rates_below_zero_or_not_finite_are_refused_where_the_optimizer_is_made():
    from transformer_nb.schedule import linear_decay_optimizer, noam_optimizer
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2)
    import numpy as np
    for bad in (-1.0, 0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match=re.escape(f"`factor` must be a positive finite number, got {bad!r}")):
            noam_optimizer(model, factor=bad)
        with pytest.raises(ValueError, match=re.escape(f"`peak` must be a positive finite number, got {bad!r}")):
            linear_decay_optimizer(model, bad, 10, 100)
    noam_optimizer(model, factor=np.float32(0.5)), linear_decay_optimizer(model, np.float64(1e-3), 10, 100)   # NumPy's


def test_the_model_names_src_or_tgt_when_it_is_not_a_tensor():
    import numpy as np
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2)
    ids = torch.tensor([[1, 2, 3]])
    for src, tgt, message in (([[1, 2, 3]], ids, "`src` must be a torch.Tensor of token ids, got list"),
                              (np.array([[1, 2]]), ids, "`src` must be a torch.Tensor of token ids, got ndarray"),
                              (ids, "1 2", "`tgt` must be a torch.Tensor of token ids, got str"),
                              (ids[0], ids, "`src` must be a (batch, len) tensor of token ids, got shape (3,)")):
        with pytest.raises((TypeError, ValueError), match=re.escape(message)):
            model(src, tgt, None)


def test_a_translation_file_without_its_extra_is_one_line(tmp_path):
    "A translation checkpoint whose `extra` is empty: no AttributeError, one line naming the file and what it lacks."
    from transformer_nb.checkpoint import CheckpointError, save_checkpoint
    from transformer_nb.translation_task import TranslationRecipe
    from transformer_nb.translator import load_translator
    save_checkpoint(tmp_path / "bare.pt", make_model(10, 10, N=1, d_model=16, d_ff=32, h=2), kind="translation")
    with pytest.raises(CheckpointError, match="a model without its training run .no recipe is saved in it: load it "
                                              "with model_from_checkpoint.; it cannot be resumed"):
        TranslationRecipe.from_checkpoint(tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="it holds no tokenizer"):
        load_translator(tmp_path / "bare.pt")
    status, _, err = _run(["translate", "--resume", str(tmp_path / "bare.pt"), "--data", str(tmp_path)])
    assert status == 2 and "a model without its training run (no recipe is saved in it" in err and "Traceback" not in err


def test_a_hostile_probe_beyond_the_list(tmp_path):
    """From probing the API again: a pad id outside the vocabulary of `LabelSmoothing` (an IndexError later), a
    fractional warmup (trained with), and `save_checkpoint` onto a folder (told to pass overwrite=True, which then
    failed) are each refused in one line naming the argument."""
    import torch
    from transformer_nb.checkpoint import save_checkpoint
    from transformer_nb.loss import LabelSmoothing
    from transformer_nb.model import make_model
    from transformer_nb.schedule import linear_decay_optimizer, noam_optimizer, rate
    with pytest.raises(ValueError, match=r"`padding_idx` must be a token id in \[0, vocab=5\), got 7"):
        LabelSmoothing(5, padding_idx=7, smoothing=0.1)
    with pytest.raises(ValueError, match="`padding_idx` must be a token id"):
        LabelSmoothing(5, padding_idx=None)
    model = make_model(11, 11, N=1, d_model=16, d_ff=32, h=2)
    for bad in (2.5, 0, True, "400"):
        with pytest.raises(ValueError, match="`warmup` must be a whole number of steps, at least 1"):
            noam_optimizer(model, 1.0, bad)
    with pytest.raises(ValueError, match="`warmup` must be a whole number of steps"):
        linear_decay_optimizer(model, 1e-3, 2.5, 100)
    assert rate(1, 16, 1.0, 4) > 0
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="is a folder; give a file name such as"):
            save_checkpoint(tmp_path, model, overwrite=overwrite)
    assert list(tmp_path.iterdir()) == []


def test_a_model_is_placed_on_a_device_not_by_a_callable_or_dict(tmp_path):
    "torch.load's callable and dict forms of map_location move tensors: read_checkpoint takes them, model loaders refuse."
    import torch
    from transformer_nb.checkpoint import read_checkpoint, save_checkpoint
    from transformer_nb.checkpoint import average_checkpoints, model_from_checkpoint
    from transformer_nb.model import make_model
    path = tmp_path / "m.pt"
    save_checkpoint(path, make_model(11, 11, N=1, d_model=16, d_ff=32, h=2))
    for form in (lambda storage, location: storage, {"cuda:0": "cpu"}):
        assert read_checkpoint(path, form)["config"]["d_model"] == 16                # tensors: fine
        for load in (lambda: model_from_checkpoint(path, form), lambda: average_checkpoints([path], form)):
            with pytest.raises(TypeError, match=r"`map_location` must name a device to place a model, not a (fun|dict)"):
                load()
    assert isinstance(model_from_checkpoint(path, torch.device("cpu")), torch.nn.Module)


def test_the_new_names_work_and_keep_their_signature():
    import inspect
    from transformer_nb.copy_task import CopyRecipe, train_copy
    from transformer_nb.loss import LabelSmoothing
    from transformer_nb.tokenizer import Tokenizer
    assert list(inspect.signature(train_copy).parameters)[0] == "recipe"            # what help() and the API page show
    assert "lr" in inspect.signature(CopyRecipe).parameters and CopyRecipe(lr=0.01).lr == 0.01
    assert Tokenizer.train(["ein hund"], vocab=None).id_to_piece[:4] == Tokenizer.specials
    assert LabelSmoothing(vocab=5, padding_idx=0).vocab == 5


def test_the_copy_recipe_peak_is_the_schedule_it_replaced():
    "The default `lr` is the peak of the paper's schedule with factor 1, exactly: the copy task trains as it did."
    from transformer_nb.copy_task import CopyRecipe
    from transformer_nb.schedule import noam_optimizer
    recipe = CopyRecipe()
    model = make_model(recipe.model_config())
    new, old = recipe.optimizer(model)[1], noam_optimizer(model, 1.0, recipe.warmup)[1]
    assert [new.lr_lambdas[0](s) for s in range(1, 400)] == [old.lr_lambdas[0](s) for s in range(1, 400)]


@pytest.fixture(scope="module")
def saved_copy_run(tmp_path_factory):
    "A one-epoch copy-task run saved by the command line."
    path = tmp_path_factory.mktemp("run") / "copy.pt"
    status, _, err = _run(["copy", "--epochs", "1", "--save", str(path), "--examples", "1"])
    assert status == 0, err
    return path


@pytest.mark.parametrize("keep", [100, 5000, 0.5, -30])
@pytest.mark.parametrize("flag", ["--resume", "--checkpoint"])
def test_a_truncated_checkpoint_is_one_line_for_every_command(tmp_path, saved_copy_run, keep, flag):
    data = saved_copy_run.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    status, _, err = _run(["copy", flag, str(tmp_path / "cut.pt"), "--examples", "1"])
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{flag} {tmp_path / 'cut.pt'}: not a transformer-nb checkpoint (a truncated or damaged file" in err, err


def test_ctrl_c_while_resuming_says_the_checkpoint_is_kept(saved_copy_run, monkeypatch):
    "Interrupted before a resumed run's next epoch: its file still holds the run as it was, and it says so."
    from transformer_nb import commands
    copy_run = saved_copy_run
    before = copy_run.read_bytes()
    monkeypatch.setattr(commands, "train_copy", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    status, _, err = _run(["copy", "--resume", str(copy_run), "--epochs", "3"])
    assert status == 130 and "nothing was saved" not in err, err
    assert f"interrupted before an epoch finished: {copy_run} still holds the run after epoch 1" in err, err
    assert copy_run.read_bytes() == before


def test_save_onto_a_dangling_link_is_refused_before_training(tmp_path):
    (tmp_path / "run.pt").symlink_to(tmp_path / "gone" / "x.pt")
    status, out, err = _run(["copy", "--epochs", "1", "--save", str(tmp_path / "run.pt")])
    assert status == 2 and "training" not in out, out
    assert f"a symbolic link to {tmp_path / 'gone' / 'x.pt'}, which does not exist; give the path of a file" in err


@pytest.mark.parametrize("sentences, message", [
    (None, "`sentences` must be a list of strings, got NoneType"),
    (b"ein hund", "`sentences` must be a list of strings, got bytes: decode them to a string, in a list"),
    ("ein hund", "`sentences` must be a list of strings, got a single string: wrap it in a list"),
])
def test_translate_names_sentences_that_are_not_a_list_of_strings(tiny_translator, sentences, message):
    from transformer_nb.translator import translate
    model, tokenizer = tiny_translator
    with pytest.raises(TypeError, match=re.escape(message)):
        translate(model, tokenizer, sentences)


@pytest.mark.parametrize("ids", [None, True, "5 6", 3.0])
def test_decode_names_ids_that_are_not_a_sequence(ids):
    from transformer_nb.tokenizer import Tokenizer
    tokenizer = Tokenizer.train(["ein hund", "a dog"], vocab=None)
    with pytest.raises(TypeError, match=re.escape("`ids` must be a list of token ids or a 1-D tensor, got")):
        tokenizer.decode(ids)


def test_decode_takes_numpy_s_integers():
    "What np.argmax returns: NumPy integers, in an array or one by one."
    import numpy as np
    from transformer_nb.tokenizer import Tokenizer
    tokenizer = Tokenizer.train(["ein hund", "a dog"], vocab=None)
    ids = tokenizer.encode("ein hund")
    assert tokenizer.decode(np.array(ids)) == tokenizer.decode([np.int64(i) for i in ids]) == "ein hund"


def test_training_a_model_whose_weights_are_nan_says_the_weights_are_the_cause():
    from transformer_nb.fit import train
    from transformer_nb.copy_task import copy_batches
    model = make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, padding_idx=0)
    with torch.no_grad():
        model.encoder.layers[0].feed_forward.w_1.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=re.escape("the weights already hold NaN or infinite values, in "
                                                           "encoder.layers.0.feed_forward.w_1.weight")):
        train(copy_batches(2, 8), model, epochs=1, progress=False)
