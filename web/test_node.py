"""engine.js under Node's own test runner (`node --test web/engine.test.js`), part of the repository's `pytest`: Python
writes what PyTorch answers (fixtures.py), Node checks the engine against it. No browser is involved; the Chromium
tests (test_parity.py) keep the page, the worker and file:// covered."""
import os
import shutil
import subprocess
import sys

import pytest

from fixtures import write_fixtures
from reference import HERE


def test_engine_under_node(tmp_path):
    node = shutil.which("node")
    if node is None:
        if os.environ.get("TNB_REQUIRE_BROWSER"):
            pytest.fail("node is not installed (apt-get install nodejs)")
        pytest.skip("node is not installed (apt-get install nodejs)")
    write_fixtures(tmp_path)
    run = subprocess.run([node, "--test", str(HERE / "engine.test.js")], capture_output=True, text=True,
                         env={**os.environ, "TNB_FIXTURES": str(tmp_path)}, timeout=600)
    summary = [line for line in run.stdout.splitlines() if line.startswith(("ok ", "not ok ", "# pass", "# fail"))]
    print("\n".join(summary), file=sys.stderr)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass 9" in run.stdout


def test_engine_holds_the_compiled_kernel():
    "engine.js's LINEAR_WASM is linear.wat compiled (`python web/build_wasm.py` after editing linear.wat)."
    try:
        from build_wasm import compiled, embedded
    except ImportError as error:                                   # wasmtime, a dev requirement, compiles .wat
        if os.environ.get("TNB_REQUIRE_BROWSER"):
            pytest.fail(f"cannot compile linear.wat: {error} (pip install -e '.[dev]')")
        pytest.skip(f"cannot compile linear.wat: {error}")
    assert embedded((HERE / "engine.js").read_text()) == compiled(), "run: python web/build_wasm.py"
