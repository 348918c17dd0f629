"""The benchmarks in bench/ still run against the package as it is now (they are run by hand to measure, so nothing else
would notice an API they call going away). Tiny sizes, one round each; no timing is asserted."""
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
}


def test_every_benchmark_is_covered():
    assert sorted(TINY) == sorted(p.name for p in (ROOT / "bench").glob("[a-z]*.py"))


@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs(script):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / script), *TINY[script]], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip(), f"{script} printed nothing"
