"""The benchmarks in bench/ still run against the package as it is now (they are run by hand to measure, so nothing else
would notice an API they call going away). Tiny sizes, one round each; no timing is asserted."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "attention.py": ["--batch", "1", "--h", "2", "--d-k", "8", "--lengths", "8", "--repeats", "1"],
    "decoding.py": ["--d-model", "16", "--N", "1", "--h", "2", "--vocab", "20", "--batch", "2", "--src-len", "5",
                    "--lengths", "4", "--repeats", "1", "--device", "cpu"],
    "train_step.py": ["--d-model", "16", "--h", "2", "--N", "1", "--d-ff", "32", "--batch", "4", "--len", "5",
                      "--vocab", "50", "--steps", "1", "--rounds", "1", "--processes", "2"],
    "copy_task.py": ["--runs", "1", "--ref-steps", "2", "--seeds", "1", "--against", "h=4"],
    "distributed.py": ["--task", "copy", "--rounds", "1", "--epochs", "2"],
    "gpu.py": ["--device", "cpu", "--tiny", "--no-compile", "--rounds", "1"],
    "step_parts.py": ["--processes", "1", "--rounds", "1", "--repeats", "1", "--threads", "1"],
    "serve.py": ["--sentences", "12", "--batch-size", "4", "--single", "2", "--rounds", "1", "--threads", "1",
                 "--data", os.environ.get("MULTI30K_DIR", str(ROOT.parent / "shared" / "data" / "multi30k"))],
}


def test_every_benchmark_is_covered():
    assert sorted(TINY) == sorted(p.name for p in (ROOT / "bench").glob("[a-z]*.py"))


@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs(script):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / script), *TINY[script]], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip(), f"{script} printed nothing"


def test_gpu_bench_counts_the_matrix_products_of_a_training_step_exactly():
    """bench/gpu.py's FLOP count (the base of its MFU) against PyTorch's own counter on a real step: equal once the
    decoder's causal self-attention is counted as a full square, as the counter counts it."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import torch
        from torch.utils.flop_counter import FlopCounterMode
        from gpu import step_flops
        from train_step import batches, ours_step
        from transformer_nb.loss import LabelSmoothing, SimpleLossCompute
        from transformer_nb.model import make_model
    finally:
        sys.path.remove(str(ROOT / "bench"))
    d, N, d_ff, V = 64, 2, 256, 500
    model = make_model(V, V, N=N, d_model=d, d_ff=d_ff, h=4, padding_idx=0)
    batch = batches(1, 8, V, 12, torch.Generator().manual_seed(0))[0]
    with FlopCounterMode(display=False) as counter:
        ours_step(model, SimpleLossCompute(model.generator, LabelSmoothing(V, 0, 0.1)), batch).backward()
    B, Lt = batch.tgt.shape
    upper = Lt * Lt - Lt * (Lt + 1) / 2                              # the query-key pairs above the diagonal
    assert step_flops(batch, d, N, d_ff, V) + 3 * N * 2 * (2 * B * upper * d) == counter.get_total_flops()
