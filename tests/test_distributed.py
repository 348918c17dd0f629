"""Two CPU processes (torchrun, gloo) must train exactly as one process does on the same global batches.

The worker (tests/ddp_worker.py) runs three short trainings under `torchrun --nproc-per-node=2`; this file runs the
same trainings in one process and compares. One parameter is left out of the weight comparison: the bias of W^K.
Adding a constant vector to every key changes every score of a query by the same amount, which the softmax ignores, so
that bias has no effect on the model and its gradient is zero up to rounding. Adam divides by the root of that
gradient's running square, which turns rounding noise into full-size steps, and the noise differs between one and two
processes. The outputs, which it cannot affect, are compared instead."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import ddp_worker  # noqa: E402
from transformer_nb.checkpoint import read_checkpoint  # noqa: E402
from transformer_nb.checkpoint import model_from_checkpoint  # noqa: E402

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--max-restarts=0",
                           str(HERE / "ddp_worker.py"), str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


def _outputs(model):
    batch = ddp_worker.RECIPE.batches(99)[0]
    with torch.no_grad():
        return model.eval()(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)


def key_bias_out(weights: dict) -> dict:
    "The weights without the key biases (the middle third of each stacked Q, K, V bias), which get no gradient."
    cut = lambda b: torch.cat([b.chunk(3)[0], b.chunk(3)[2]])
    return {k: cut(t) if k.endswith("w_qkv.bias") else t for k, t in weights.items()}


def _assert_same_training(one_model, one_history, two: dict):
    assert [h["step"] for h in two["history"]] == [h["step"] for h in one_history]
    for a, b in zip(two["history"], one_history):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)        # the whole batch's loss, on rank 0
    weights, theirs = key_bias_out(one_model.state_dict()), key_bias_out(two["model"])
    assert len(weights) > 30
    for key in weights:
        torch.testing.assert_close(theirs[key], weights[key], rtol=1e-4, atol=1e-5, msg=key)
    twin = ddp_worker.tiny_model()
    twin.load_state_dict(two["model"])
    torch.testing.assert_close(_outputs(twin), _outputs(one_model), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["plain", "accumulate"])
def test_two_processes_equal_one(two_processes, name):
    two = torch.load(two_processes / f"{name}.pt")
    assert two["size"] == 2
    model, history = ddp_worker.run(name)
    _assert_same_training(model, history, two)


def test_different_batches_are_refused(two_processes):
    "Processes that built different batches (here: different seeds) stop with a clear error instead of hanging."
    message = (two_processes / "mismatch.txt").read_text()
    assert "the processes built different batches for this epoch" in message


def test_key_bias_has_no_effect():
    "Why the comparison leaves W^K's bias out: changing it changes no output."
    model, _ = ddp_worker.run("first_epoch")
    before = _outputs(model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("w_qkv.bias"):
                p.chunk(3)[1].add_(torch.randn(p.numel() // 3))        # the key bias: the middle third
    torch.testing.assert_close(_outputs(model), before, rtol=1e-5, atol=1e-5)


def test_two_process_checkpoint_resumes_in_one(two_processes):
    ckpt = two_processes / "first_epoch.ckpt"
    saved = read_checkpoint(ckpt)
    assert [h["epoch"] for h in saved["extra"]["history"]] == [1]
    model_from_checkpoint(ckpt)                                        # a plain single-process model
    resumed, history = ddp_worker.run("first_epoch", resume=ckpt, epochs=2)   # epoch 2, in one process
    straight, straight_history = ddp_worker.run("plain")               # both epochs in one process
    two = {"model": resumed.state_dict(), "history": history}
    _assert_same_training(straight, straight_history, two)


DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data/multi30k")
def test_translate_command_under_torchrun(tmp_path):
    "`torchrun ... transformer-nb translate` trains on two processes, prints once, and saves a model one process loads."
    from transformer_nb.translator import load_translator
    cli = "import sys; from transformer_nb.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--max-restarts=0",
                           "--no-python", sys.executable, "-c", cli, "translate", "--data", str(DATA),
                           "--train-pairs", "300", "--epochs", "2", "--N", "1", "--d-model", "32", "--d-ff", "64",
                           "--h", "2", "--vocab", "200", "--test-sentences", "20", "--beam-size", "1",
                           "--examples", "1", "--save", str(tmp_path / "mt.pt")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = proc.stdout
    assert out.count("2 processes (gloo)") == 1 and out.count("epoch   2") == 1 and out.count("test BLEU") == 1, out
    model, tokenizer, history = load_translator(tmp_path / "mt.pt")
    assert [h["epoch"] for h in history] == [1, 2] and len(tokenizer) == model.config.tgt_vocab


def test_ddp_gets_its_buffer_switch_by_the_name_it_takes(tmp_path):
    """`World.wrap` passes the buffer switch under the name the installed DDP takes (`forward_sync_buffers` from
    PyTorch 2.13, `broadcast_buffers` before), and wrapping warns of nothing (2.13 deprecates the old name)."""
    import warnings
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformer_nb.distributed import _buffer_sync_argument, _NO_BUFFER_SYNC
    from transformer_nb.model import make_model

    class BeforeTwoThirteen:                                           # the signature of DDP in PyTorch 2.6 to 2.12
        def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True): ...

    assert _buffer_sync_argument(BeforeTwoThirteen) == "broadcast_buffers"
    assert _NO_BUFFER_SYNC == _buffer_sync_argument(DistributedDataParallel)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                             # any warning fails the test
            DistributedDataParallel(make_model(11, 11, N=1, d_model=16, d_ff=32, h=2), **{_NO_BUFFER_SYNC: False})
    finally:
        dist.destroy_process_group()


def test_the_batch_fingerprint_tells_order_rows_and_targets_apart():
    "What World.shard compares between processes: equal for equal batches, different for any reordering or change."
    from transformer_nb.batch import Batch
    from transformer_nb.copy_task import CopyRecipe
    from transformer_nb.distributed import _checksum
    a, b = CopyRecipe(batch_size=4).batches(1)[:2]
    swapped_rows = Batch(a.src.flip(0), a.tgt.flip(0))
    other_target = Batch(a.src, a.tgt.roll(1, dims=1))
    assert _checksum([a, b]) == _checksum(CopyRecipe(batch_size=4).batches(1)[:2])
    assert len({_checksum(x) for x in ([a, b], [b, a], [swapped_rows, b], [other_target, b])}) == 4
    rows = torch.tensor([[1, 3, 4, 5, 2, 0], [1, 5, 4, 3, 2, 0]])           # two rows of equal sums, swapped
    assert _checksum([Batch(rows, rows)]) != _checksum([Batch(rows.flip(0), rows.flip(0))])
