"""Bad input gets one clear line that names what was wrong, before any work: the command line exits 2 with the option
named, the API raises ValueError or TypeError naming the argument. (Issue: a hostile tester's inputs; more to come.)"""
import contextlib
import io
import re

import pytest
import torch

from transformer_nb.cli import main
from transformer_nb.model import make_model


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
    (["copy", "--N", "-3"], "argument --N: expected a positive integer, got -3"),
    (["copy", "--N", "two"], "argument --N: invalid _positive value: 'two'"),
    (["copy", "--epochs", "0"], "argument --epochs: expected a positive integer, got 0"),
    (["copy", "--seed", str(2**70)], "argument --seed: expected a seed in [0, 2**63)"),
    (["copy", "--seed", "-1"], "argument --seed: expected a seed in [0, 2**63)"),
    (["copy", "--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
    (["copy", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["summary", "--dropout", "1.5"], "argument --dropout: expected a probability in [0, 1), got 1.5"),
    (["summary", "--dropout", "nan"], "argument --dropout: expected a probability in [0, 1), got nan"),
    (["translate", "--length-penalty", "-1", "--data", "."], "argument --length-penalty: expected a finite number >= 0"),
    (["translate", "--length-penalty", "inf", "--data", "."], "argument --length-penalty: expected a finite number >= 0"),
    (["translate", "--length-penalty", "nan", "--data", "."], "argument --length-penalty: expected a finite number >= 0"),
    (["copy", "--checkpoint", "no/such/file.pt"], "--checkpoint no/such/file.pt: no such file"),
    (["copy", "--resume", "no/such/file.pt"], "--resume no/such/file.pt: no such file"),
    (["copy", "--save", ""], "`--save` is empty"),
    (["copy", "--checkpoint", "x.pt", "--save", "y.pt"], "cannot be combined with --save or --resume"),
    (["translate", "--data", "no/such/folder"], "--data no/such/folder: not a folder"),
    (["summary", "--share-embeddings", "--tgt-vocab", "100"], "src_vocab=37000 and tgt_vocab=100"),
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
    (dict(max_len=10**6), "`max_len` must be at most 100,000"),
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
