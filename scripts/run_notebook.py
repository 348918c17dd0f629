"""Execute a notebook in place from a fresh kernel, top to bottom, the way the tests run it: cells flagged `#| slow`
keep their stored outputs (they are the real runs, minutes to an hour long) and `#| eval: false` cells are skipped;
`--all` runs the slow cells too. Run it on an idle machine: the stored outputs are what readers see, timings included.

    python scripts/run_notebook.py nbs/06_decoding.ipynb [--all]

Then `nbdev_clean` and `python nbs/build_docs.py`, as after any notebook change.
"""
import argparse
import os
import re
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def run(path: Path, run_slow: bool = False, slow_cells=()):
    "Execute `path` in place; print each cell's seconds. `slow_cells`: ids of slow cells to run (the others keep theirs)."
    os.environ["TQDM_DISABLE"] = "1"                       # no progress-bar widgets in the stored outputs
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=3600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    start = time.perf_counter()
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            flags = " ".join(line for line in cell.source.splitlines() if line.startswith("#|"))
            if cell.cell_type != "code" or re.search(r"eval:\s*false", flags):
                continue
            if not run_slow and re.search(r"#\|\s*slow\b", flags) and cell.get("id") not in slow_cells:
                print(f"cell {i}: slow, stored outputs kept", flush=True)
                continue
            t = time.perf_counter()
            client.execute_cell(cell, i)
            print(f"cell {i}: {time.perf_counter() - t:.1f} s", flush=True)
    nbformat.write(nb, path)
    print(f"{path}: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--all", action="store_true", help="run the cells flagged slow too")
    parser.add_argument("--slow", nargs="+", default=(), metavar="ID", help="run these slow cells (by cell id) too")
    args = parser.parse_args()
    run(args.notebook, args.all, set(args.slow))
