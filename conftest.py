"""pytest collects every notebook in nbs/ as one test item, next to the ordinary tests in tests/.

Each notebook runs in a fresh Python process through nbdev's own runner (`nbdev.test.test_nb`), so
`#| eval: false` and the flags in settings.ini's `tst_flags` (cells marked `#| notest` or `#| slow`)
behave exactly as under `nbdev_test`. `pytest --nbflags slow` runs the slow cells too.
"""
import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent

# pytest.ini runs the tests in one worker process per core (pytest-xdist). In a worker, before anything imports torch:
# its share of PyTorch's threads, the CPUs this process may use divided among the workers (two processes that each use
# every core slow each other down many times over). A worker's torchrun passes its share on to each of its processes.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _workers)))

collect_ignore_glob = ["docs/*", "_proc/*", "_build/*", "build/*", "bench/*", "test-artifacts/*"]

_RUNNER = """
import sys
from pathlib import Path
from nbdev.test import test_nb
fn, skip, force = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
ok, secs = test_nb(fn, skip_flags=skip, force_flags=force, showerr=True)
print(f"{fn.name}: {'ok' if ok else 'FAILED'} in {secs:.1f}s")
sys.exit(0 if ok else 1)
"""


def pytest_addoption(parser):
    parser.addoption("--nbflags", default="", help="space-separated nbdev test flags to run anyway (e.g. 'slow')")


def _tst_flags():
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return cfg["DEFAULT"].get("tst_flags", "")


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".ipynb" and file_path.parent == ROOT / "nbs" and not file_path.name.startswith("_"):
        return NotebookFile.from_parent(parent, path=file_path)


class NotebookFile(pytest.File):
    def collect(self):
        yield NotebookItem.from_parent(self, name=self.path.stem)


class NotebookFailed(Exception):
    pass


class NotebookItem(pytest.Item):
    def runtest(self):
        force = self.config.getoption("--nbflags")
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(self.path), _tst_flags(), force],
            capture_output=True, text=True, cwd=self.path.parent,
        )
        if proc.returncode != 0:
            raise NotebookFailed(proc.stdout[-5000:] + proc.stderr[-20000:])

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, NotebookFailed):
            return f"notebook {self.path.name} failed:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"notebook: {self.path.name}"
