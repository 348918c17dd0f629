"""The repository's own promises: README generated from nbs/index.ipynb, CI running the README's test command,
the exported package in step with the notebooks, and a core package that imports without the `viz` extra."""
import ast
import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_generated_from_index():
    render = runpy.run_path(str(ROOT / "nbs" / "make_readme.py"))["render_readme"]
    assert (ROOT / "README.md").read_text(encoding="utf-8") == render(), \
        "README.md is stale: run `python nbs/make_readme.py` after editing nbs/index.ipynb"


def test_readme_gives_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2, commands
    assert "# the main job" in commands[0] and "# every test" in commands[1]
    extracted = subprocess.run(["bash", "-c", "grep -m1 '# every test' README.md | sed 's/[[:space:]]*#.*$//'"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert extracted == commands[1].split("#")[0].strip()
    assert "pytest" in extracted
    assert "grep -m1 '# every test' README.md" in (ROOT / ".ci" / "run").read_text()


def test_exported_package_matches_notebooks(tmp_path):
    for name in ("nbs", "transformer_nb"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copy(ROOT / "settings.ini", tmp_path)
    for _ in range(2):                                                    # twice: exporting again changes nothing
        subprocess.run(["nbdev_export"], cwd=tmp_path, check=True, capture_output=True)
    for py in sorted((ROOT / "transformer_nb").glob("*.py")):
        assert (tmp_path / "transformer_nb" / py.name).read_text() == py.read_text(), \
            f"transformer_nb/{py.name} differs from what nbdev_export writes: run nbdev_export and commit"


def test_core_modules_import_without_viz_extra():
    code = ("import sys, importlib, pkgutil\n"
            "for blocked in ('pandas', 'altair', 'vl_convert', 'fastcore', 'nbdev', 'sacrebleu'): sys.modules[blocked] = None\n"
            "import transformer_nb\n"
            "for m in pkgutil.iter_modules(transformer_nb.__path__):\n"
            "    importlib.import_module('transformer_nb.' + m.name)\n"
            "from transformer_nb.bleu import bleu\n"
            "try:\n    bleu(['a'], ['a'])\n"
            "except ImportError as e:\n    assert \"pip install 'transformer-nb[translate]'\" in str(e), e\n"
            "else:\n    raise SystemExit('bleu() without sacrebleu should raise ImportError')\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_console_script():
    ok = subprocess.run(["transformer-nb", "summary", "--N", "1", "--src-vocab", "10", "--tgt-vocab", "12"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "total" in ok.stdout and "N=1" in ok.stdout
    bad = subprocess.run(["transformer-nb", "summary", "--h", "5"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "d_model=512 must be divisible by the number of heads h=5" in bad.stderr


def test_every_diagram_is_drawn_by_its_script_and_shown(tmp_path):
    "nbs/images/draw.py reproduces the SVG files kept beside it, and every one appears in a chapter."
    images = ROOT / "nbs" / "images"
    before = {p.name: p.read_bytes() for p in images.glob("*.svg")}
    shutil.copy(images / "draw.py", tmp_path)
    runpy.run_path(str(tmp_path / "draw.py"))                             # draws beside its copy, not in the repository
    after = {p.name: p.read_bytes() for p in tmp_path.glob("*.svg")}
    assert after == before, "nbs/images/draw.py draws other diagrams: run it, look at them, then commit the new ones"
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "nbs").glob("*.ipynb"))
    unused = [name for name in sorted(after) if f"(images/{name})" not in text]
    assert after and not unused, f"diagrams no chapter shows: {unused}"


def test_shown_code_fits_the_text_column():
    """Code a chapter shows keeps its lines to 120 characters (what the site's text column holds at 1300 px; shape comments
    go on their own line above long ones), and no notebook holds control characters (a `\\b` written from a Python
    string once turned `$\\bar y$` into a backspace and broke the equation)."""
    too_long, control = [], []
    for path in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            src = "".join(cell["source"])
            control += [f"{path.name} cell {i}"] if re.search(r"[\x00-\x08\x0b-\x1f]", src) else []
            if cell["cell_type"] != "code" or re.search(r"^#\| (hide|echo: false|include: false)", src, re.M):
                continue
            too_long += [f"{path.name} cell {i}: {len(l)} characters: {l[:60]}" for l in src.splitlines() if len(l) > 120]
    assert not too_long, "\n".join(too_long)
    assert not control, control


# The package's layers, lowest first (DEVELOPERS.md, under "Conventions"): a module imports only from its own layer or
# the ones before it (below it).
LAYERS = [
    ("the model", ["_checks", "embedding", "masks", "attention", "layers", "model"]),
    ("training pieces", ["precision", "batch", "schedule", "loss", "epoch"]),
    ("inference", ["cache", "decoding"]),
    ("files and checkpoints", ["files", "checkpoint", "resume"]),
    ("text and data", ["tokenizer", "data", "bleu"]),
    ("a trained translator", ["translator", "web"]),
    ("processes", ["distributed"]),
    ("the fit loop", ["fit"]),
    ("conversion", ["interop"]),
    ("serving", ["onnx_model", "export"]),
    ("tasks", ["copy_task", "translation_task", "text_task"]),
    ("the command line", ["commands", "cli"]),
]


def _imports(module: str) -> set:
    "The package modules `module` imports (at the top or inside functions)."
    src = (ROOT / "transformer_nb" / f"{module}.py").read_text(encoding="utf-8")
    return set(re.findall(r"^\s*from \.(\w+) import", src, re.M))


def test_imports_run_one_way():
    layer = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
    modules = {p.stem for p in (ROOT / "transformer_nb").glob("*.py") if p.stem not in ("__init__", "_modidx")}
    assert set(layer) == modules, f"modules missing from LAYERS or gone: {sorted(set(layer) ^ modules)}"
    upward = [f"{m} ({LAYERS[layer[m]][0]}) imports {d} ({LAYERS[layer[d]][0]})"
              for m in sorted(modules) for d in sorted(_imports(m)) if layer[d] > layer[m]]
    assert not upward, upward


def test_no_module_imports_another_modules_private_names():
    "A name with a leading underscore is its module's own: no other module of the package imports it."
    private = []
    for path in sorted((ROOT / "transformer_nb").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("transformer_nb")):
                private += [f"{path.stem} imports {a.name} from {node.module}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private, private


def _reached(module: str) -> set:
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        seen.add(m)
        todo += [d for d in _imports(m) if d not in seen]
    return seen


def test_inference_never_imports_training():
    """Decoding pulls in no training loop, optimizer, loss or checkpoint code; a translator (loaded from a file, with
    its tokenizer) no training loop, optimizer or loss."""
    training = {"epoch", "fit", "schedule", "loss"}
    assert not _reached("decoding") & (training | {"checkpoint", "files"}), sorted(_reached("decoding"))
    assert not _reached("translator") & training, sorted(_reached("translator"))
    assert not _reached("web") & training, sorted(_reached("web"))


def test_every_module_is_written_by_one_notebook():
    """Each module is the `default_exp` of exactly one notebook. A chapter that also writes other modules (`#| exports
    NAME`) has, for each, a notebook `nbs/modules/<chapter>-NAME.ipynb` that declares it: nbdev_export handles notebooks
    in order of their file names and only *appends* to a module that is not a notebook's default, so that notebook's
    name must sort before the chapter's (it writes the module anew, then the chapter adds to it)."""
    defaults, extra = {}, {}
    for nb in sorted((ROOT / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        src = [("".join(c["source"])) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]]
        for d in (m for s in src for m in re.findall(r"^#\| default_exp (\w+)", s, re.M)):
            defaults.setdefault(d, []).append(nb)
        for name in {m for s in src for m in re.findall(r"^#\| exports? (\w+)", s, re.M)}:
            extra.setdefault(name, []).append(nb)
    assert all(len(v) == 1 for v in defaults.values()), {k: v for k, v in defaults.items() if len(v) > 1}
    assert all(len(v) == 1 for v in extra.values()), extra
    for name, (chapter,) in extra.items():
        stub = defaults[name][0]
        assert stub == ROOT / "nbs" / "modules" / f"{chapter.stem}-{name}.ipynb", (name, stub, chapter)
        assert stub.name < chapter.name                                  # handled first by nbdev_export
    modules = {p.stem for p in (ROOT / "transformer_nb").glob("*.py") if p.stem not in ("__init__", "_modidx")}
    assert set(defaults) == modules, sorted(set(defaults) ^ modules)


def test_every_module_has_one_concern_in_at_most_250_lines():
    long = {p.name: n for p in (ROOT / "transformer_nb").glob("*.py") if p.stem not in ("__init__", "_modidx")
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > 250}
    assert not long, f"modules over 250 lines: {long}"


def _exercises(nb: Path) -> list:
    "The chapter's exercises between '## Exercises' and '## Summary': `(number, its markdown, the code cell after it)`."
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    text = lambda c: "".join(c["source"])
    start = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "## Exercises" in text(c)), None)
    assert start is not None, f"{nb.name} has no '## Exercises' section"
    found = []
    for i, c in enumerate(cells[start:], start):
        body = text(c).split("## Exercises", 1)[-1]
        if c["cell_type"] == "markdown" and re.search(r"^## Summary", body, re.M):
            break
        after = cells[i + 1] if i + 1 < len(cells) and cells[i + 1]["cell_type"] == "code" else None
        if c["cell_type"] == "markdown":
            found += [(int(m[1]), body, after and text(after)) for m in re.finditer(r"^(\d+)\. ", body, re.M)]
    return found


@pytest.mark.parametrize("nb", sorted(p.name for p in (ROOT / "nbs").glob("[0-9]*.ipynb")))
def test_every_exercise_has_a_hint_and_a_worked_solution_folded(nb):
    """Each exercise is its own markdown cell holding a folded hint and a folded worked solution (`<details>`); a code
    cell that follows it is the solution's code, folded on the site with its output (`#| solution: true`)."""
    exercises = _exercises(ROOT / "nbs" / nb)
    numbers = [n for n, _, _ in exercises]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3, f"{nb}: exercises {numbers}"
    for n, body, code in exercises:
        assert body.count("<details><summary>Hint</summary>") == 1, f"{nb} exercise {n}: one folded hint"
        assert body.count("<details><summary>Solution</summary>") == 1, f"{nb} exercise {n}: one folded solution"
        assert body.count("</details>") == 2, f"{nb} exercise {n}"
        if code is not None:
            assert code.startswith("#| solution: true\n"), f"{nb} exercise {n}: its code cell is not marked a solution"


def test_the_wheel_installs_and_translates_without_a_warning(tmp_path):
    """`pip wheel .` builds a wheel that declares what importing the package needs (PyTorch warns "Failed to initialize
    NumPy" at its own import when NumPy is missing, so NumPy is declared) and holds the shipped translator; installed
    in a fresh virtual environment, `transformer-nb translate --pretrained` translates and writes nothing to stderr."""
    import zipfile
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True)
    wheel, = (tmp_path / "dist").glob("transformer_nb-*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode()
        assert "transformer_nb/pretrained/multi30k-de-en.pt" in z.namelist()
    needs = {re.split(r"[<>=; ]", line.split(":", 1)[1].strip())[0].lower()
             for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert needs == {"torch", "tqdm", "numpy"}, needs
    venv = tmp_path / "venv"                             # PyTorch and NumPy from this environment, the package anew
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                   check=True, capture_output=True)
    run = subprocess.run([venv / "bin" / "transformer-nb", "translate", "--pretrained", "--sentence", "Ein Hund läuft."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert "-> A dog runs." in run.stdout, run.stdout
    where = subprocess.run([venv / "bin" / "python", "-c", "import transformer_nb; print(transformer_nb.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True).stdout
    assert where.startswith(str(venv)), where                            # the wheel's copy, not this checkout


def test_the_public_api_is_what_the_book_teaches_and_a_user_calls():
    """At most 100 names in the modules' `__all__` (validators, tables and format constants are private); the package
    itself exports what a user reaches for first; `make_model` shows its parameters to `help()`."""
    import importlib
    import inspect
    import pkgutil
    import transformer_nb
    names = [n for m in pkgutil.iter_modules(transformer_nb.__path__) if not m.name.startswith("_")
             for n in importlib.import_module(f"transformer_nb.{m.name}").__all__]
    assert len(names) <= 100 and not [n for n in names if n.startswith("_")], (len(names), names)
    for first in ("ModelConfig", "make_model", "train", "translate", "load_pretrained", "greedy_decode", "beam_search"):
        assert first in transformer_nb.__all__ and hasattr(transformer_nb, first), first
    parameters = inspect.signature(transformer_nb.make_model).parameters
    assert list(parameters)[:7] == ["src_vocab", "tgt_vocab", "N", "d_model", "d_ff", "h", "dropout"], list(parameters)
