"""Build the docs site into docs/ and regenerate README.md, offline. Run from anywhere: `python nbs/build_docs.py`.

Quarto cannot run here, so this replaces `nbdev_docs`:
1. nbdev processes the notebooks (`nbdev.serve.proc_nbs`: applies `#| hide`, adds `show_doc` for exported symbols
   (each becomes an anchor beside the code it documents),
   writes front matter with each page's `output-file`) into `_proc/`.
2. Each processed notebook is adapted for Sphinx + myst-nb: named after its nbdev output file (`02_attention.ipynb`
   -> `attention.ipynb`, so nbdev's links `attention.html#attention` resolve), title from its front matter, nbdev cell
   directives mapped to myst-nb tags, SVG charts inlined, links to the docs host made relative, and a link to download
   the chapter's notebook (the file in `nbs/`) under its title. The sidebar numbers the chapters as their notebooks
   are numbered: the main line (00-09), then the appendices (10-16, `APPENDICES`).
   The diagrams in `nbs/images/` (SVG, drawn by `nbs/images/draw.py`) are copied beside them.
3. Sphinx + myst-nb (outputs rendered, never executed) + sphinx-book-theme render the site into `docs/`, with an
   autodoc API page.
4. The math is typeset ahead of time into SVG by MathJax 3 under Node (`nbs/sphinx/math_svg.js`, npm package
   `mathjax-full`), so pages load no MathJax script; the theme's unused Font Awesome script and translations are
   dropped. Every chapter's first load stays under 2.5 MB (tests/test_docs.py measures it in a browser).
5. `docs/_notebook_hashes.json` records a hash of every source the site was built from (notebooks, Sphinx
   configuration, this script); a test compares it.
"""
import hashlib
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

NBS = Path(__file__).resolve().parent
ROOT = NBS.parent
BUILD = ROOT / "_build"                      # scratch space (ignored by git)
DOCS = ROOT / "docs"
MATHJAX_VERSION = "3.2.2"
DOC_HOST = "https://transformer-nb.github.io/transformer_nb/"
GIT_URL = "https://github.com/transformer-nb/transformer_nb"
TAGS = {"echo: false": "remove-input", "output: false": "remove-output", "include: false": "remove-cell",
        "code-fold: true": "hide-input",
        "solution: true": "hide-cell"}          # an exercise's worked solution: code and output folded together
TOUR = "tour.ipynb"   # the whole model on one page, first in the sidebar
APPENDICES = ["10_interop.ipynb", "11_fit.ipynb", "12_distributed.ipynb", "13_precision.ipynb", "14_browser.ipynb", "15_cli.ipynb",
              "16_serving.ipynb"]   # listed apart in the sidebar


def api_modules() -> list:
    """The package's modules in reading order, read from the notebooks (the one list of them): each notebook's modules in
    the order their first shown code (`#| exports [NAME]`) appears, a module that shows none at the end of its notebook."""
    mods = []
    for nb in sorted(NBS.glob("[0-9]*.ipynb")):
        default, found = None, []
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            src = _text(cell["source"])
            default = default or next(iter(re.findall(r"^#\| default_exp (\w+)", src, re.M)), None)
            for name in re.findall(r"^#\| exports?(?: (\w+))?[ \t]*$", src, re.M) if "#| exports" in src else []:
                found.append(name or default)
        for name in [*found, default]:
            if name and name not in mods:
                mods.append(name)
    return mods


def notebook_hashes() -> dict:
    "sha256 of everything the site is built from: the notebooks, the Sphinx configuration and this script."
    folders = [NBS / "sphinx", NBS / "images"]
    sources = [*NBS.glob("*.ipynb"), *(p for d in folders for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
               Path(__file__), *WEB, ROOT / "transformer_nb" / "pretrained" / "multi30k-de-en.pt"]
    return {Path(os.path.relpath(p, NBS)).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(sources)}


def _text(src):
    return "".join(src) if isinstance(src, list) else src


def _front_matter(nb) -> dict:
    first = nb["cells"][0]
    if first["cell_type"] != "raw" or not _text(first["source"]).startswith("---"):
        return {}
    import yaml
    return yaml.safe_load(_text(first["source"]).strip().strip("-")) or {}


def _relink(text: str, pages) -> str:
    "Point links at the docs host or at `page.html#anchor` to the Sphinx sources, so MyST resolves and checks them."
    text = text.replace(DOC_HOST, "").replace("(DEVELOPERS.md)", f"({GIT_URL}/blob/main/DEVELOPERS.md)")
    return re.sub(r"\]\((\w+)\.html(#[\w.-]+)?\)",
                  lambda m: f"]({m[1]}.ipynb{m[2] or ''})" if m[1] in pages else m[0], text)


def _adapt_cell(cell, page_names):
    src = _text(cell["source"])
    pages = set(page_names.values())
    if cell["cell_type"] == "markdown":
        for nb_name, page in page_names.items():
            src = src.replace(f"(nbs/{nb_name})", f"({page}.ipynb)")  # README-style links to notebooks -> pages
        cell["source"] = _relink(src, pages)
        return cell
    if cell["cell_type"] != "code":
        return cell
    lines = src.splitlines()
    directives = [l[3:].strip() for l in lines if l.startswith("#| ")]
    tags = sorted({TAGS[d] for d in directives if d in TAGS})
    cell.setdefault("metadata", {})["tags"] = tags
    for d in directives:                                                # Quarto's label for a folded cell
        if d.startswith("code-summary:"):
            show = d.split(":", 1)[1].strip().strip("\"")
            cell["metadata"]["mystnb"] = {"code_prompt_show": show, "code_prompt_hide": re.sub(r"^Show", "Hide", show)}
    cell["source"] = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
    charts = []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/svg+xml" in data:                                    # inline the chart: an <svg> in the page itself
            svg = _legible(_hex_colours(_hover_titles(_text(data.pop("image/svg+xml")))))
            data.pop("text/plain", None)
            data["text/html"] = f'<div class="tnb-chart">{svg}</div>'
            charts.append(out)
    if len(charts) > 1:        # several charts from one cell, side by side and wrapping: a phone shows one per row
        panels = "".join(c["data"]["text/html"] for c in charts)
        charts[0]["data"]["text/html"] = f'<div class="tnb-charts">{panels}</div>'
        cell["outputs"] = [o for o in cell["outputs"] if o is charts[0] or not any(o is c for c in charts)]
    return cell


def _legible(svg: str, smallest: float = 0.8) -> str:
    """A chart may shrink to fit a narrow screen down to `smallest` of its size (Vega's 10-px labels stay at 8 px or
    more); a chart wider than that scrolls sideways in its own box (the CSS's phone rule)."""
    width = re.search(r'<svg[^>]*?\swidth="([\d.]+)"', svg)
    if not width:
        return svg
    return svg.replace("<svg", f'<svg style="min-width: {math.ceil(float(width.group(1)) * smallest)}px"', 1)


def _hex_colours(svg: str) -> str:
    "Vega's `rgb(224, 224, 224)` as `#e0e0e0`, the same colour in 7 characters instead of 18 (one per heat-map cell)."
    return re.sub(r"rgb\((\d+), (\d+), (\d+)\)", lambda m: "#%02x%02x%02x" % tuple(map(int, m.groups())), svg)


def _hover_titles(svg: str) -> str:
    """Each mark's description (Vega's `aria-label`, e.g. "col: Tisch; row: table; weight: 0.87") as a `<title>`, which
    the browser shows when the pointer rests on the mark, instead of three ARIA attributes per mark: a heat map of 300
    cells is a third smaller, and its numbers can be read on the page."""
    return re.sub(r'<path aria-label="([^"]*)" role="graphics-symbol" aria-roledescription="[^"]*" ([^>]*?)/>',
                  r'<path \2><title>\1</title></path>', svg)


def _anchor_for_card(cell):
    """nbdev's card for an exported name (a `show_doc` cell), replaced by an anchor alone: the chapters show the code
    itself right beside it, so the card would only repeat its signature and docstring (and nbdev 2.4 draws classes as
    `def` and adds annotations the code does not have). The anchor keeps nbdev's links (`attention.html#attention`)."""
    src = _text(cell["source"])
    if cell["cell_type"] != "code" or not re.search(r"^show_doc\(", src, re.M):
        return None
    md = "".join(_text(o.get("data", {}).get("text/markdown", "")) for o in cell.get("outputs", []))
    heading = re.search(r"^#+ (.+)$", md, re.M)
    if heading is None:
        raise ValueError(f"a show_doc cell without a heading: {src!r}")
    return {"cell_type": "markdown", "id": cell.get("id", "card"), "metadata": {},
            "source": f'<a id="{heading[1].strip().lower()}"></a>\n'}


def _with_definition_anchors(cells):
    """An anchor before each exported cell for every top-level name it defines that has no card anchor (private
    helpers such as `_eval_mode`) and for its classes' methods (`kvcache.project`), so that nbdev's links to them land
    on their code."""
    import ast
    have = {re.search(r'id="([^"]+)"', _text(c["source"]))[1] for c in cells
            if c["cell_type"] == "markdown" and _text(c["source"]).startswith("<a id=")}
    out = []
    for c in cells:
        src = _text(c["source"])
        if c["cell_type"] == "code" and re.search(r'^#\| (exports?\b|code-summary: "Exported source")', src, re.M):
            try:
                tree = ast.parse("\n".join(l for l in src.splitlines() if not l.startswith("%")))
            except SyntaxError:
                tree = None
            defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            names = [n.name for n in (tree.body if tree else []) if isinstance(n, defs)]
            names += [f"{n.name}.{m.name}" for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef)
                      for m in n.body if isinstance(m, defs) and not m.name.startswith("__")]   # nbdev links methods
            new = [n.lower() for n in names if n.lower() not in have]
            have |= set(new)
            if new:
                out.append({"cell_type": "markdown", "id": f"def-{new[0]}", "metadata": {},
                            "source": "".join(f'<a id="{n}"></a>' for n in new) + "\n"})
        out.append(c)
    return out


def _toctrees(notebooks, page_names) -> str:
    "The sidebar: the tour, the chapters numbered as their notebooks are (`02 Attention`), the appendices, the API."
    def entry(path):
        title = _front_matter(json.loads(path.read_text(encoding="utf-8"))).get("title", path.stem)
        return f"{path.name[:2]} {title.replace('`', '')} <{page_names[path.name]}>"
    chapters = [entry(p) for p in notebooks if p.name[:2].isdigit() and p.name not in APPENDICES]
    appendices = [entry(p) for p in notebooks if p.name in APPENDICES]
    start = [f"A tour: the whole model on one page <{page_names[TOUR]}>"] if TOUR in page_names else []
    block = lambda caption, entries: f"```{{toctree}}\n:hidden:\n:caption: {caption}\n\n" + "\n".join(entries) + "\n```\n"
    return (block("Start here", start) + "\n" + block("Chapters", chapters) + "\n" + block("Appendices", appendices)
            + "\n" + block("Reference", ["api"]))


def _skip_solutions_in_nbdev():
    """nbdev's processing runs every cell that holds an import (to render `show_doc`), which would run an exercise's
    solution (`#| solution: true`) without the cells before it. Solutions are shown with their stored outputs, like every
    other cell, so nbdev never needs to run them."""
    import nbdev.processors as processors
    import nbdev.serve
    do_eval = getattr(processors._do_eval, "__wrapped__", processors._do_eval)
    skip = lambda cell: None if "solution:" in cell.directives_ else do_eval(cell)
    skip.__wrapped__ = do_eval
    processors._do_eval = skip
    nbdev.serve.parallel = lambda f, items, **kwargs: [f(item) for item in items]   # in this process, so patched


def prepare_sources(src: Path):
    "Process the notebooks with nbdev and write Sphinx sources into `src`."
    from nbdev.serve import proc_nbs
    _skip_solutions_in_nbdev()
    proc = proc_nbs(force=True, n_workers=1)
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    shutil.copytree(NBS / "images", src / "images")                   # the diagrams the chapters show
    notebooks = sorted(Path(proc).glob("*.ipynb"))
    pages, page_names = [], {}
    for path in notebooks:
        fm = _front_matter(json.loads(path.read_text(encoding="utf-8")))
        page = Path(fm.get("output-file", path.stem + ".html")).stem
        page_names[path.name] = page
    for path in notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        fm = _front_matter(nb)
        cells = [c for c in nb["cells"][1 if fm else 0:]
                 if not (c["cell_type"] == "markdown" and "AUTOGENERATED! DO NOT EDIT" in _text(c["source"]))]
        title = fm.get("title", path.stem)
        head = f"# {title}\n\n" + (f"> {fm['description']}\n" if fm.get("description") else "")
        if (NBS / path.name).exists() and path.name != "index.ipynb":        # the notebook itself, to run or change
            (src / "notebooks").mkdir(exist_ok=True)
            shutil.copy(NBS / path.name, src / "notebooks" / path.name)
            kind = "appendix" if path.name in APPENDICES else "chapter"
            head += (f"\n{{download}}`Download this {kind} as a notebook <notebooks/{path.name}>` ({path.name}; it runs "
                     "in the `nbs/` folder of a clone of the repository, installed with `pip install -e \".[dev]\"`, "
                     "as on the home page)\n")
        cells = [_anchor_for_card(c) or c for c in cells]
        cells = [{"cell_type": "markdown", "id": "tnb-title", "metadata": {}, "source": head}] + [
            _adapt_cell(c, page_names) for c in _with_definition_anchors(cells)]
        page = page_names[path.name]
        if page == "index":
            cells.append({"cell_type": "markdown", "id": "tnb-toc", "metadata": {},
                          "source": "## Reference\n\nThe [API reference](api.md) lists every public function and class, "
                                    "generated from the docstrings.\n\n" + _toctrees(notebooks, page_names)})
        else:
            pages.append(page)
        nb["cells"] = cells
        nb["metadata"] = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                          "language_info": {"name": "python"}}
        (src / f"{page}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    api = ["# API reference", "", "Every public name of the package, from its docstrings. The chapters explain them.", ""]
    for mod in api_modules():
        api += [f"## `transformer_nb.{mod}`", "", "```{eval-rst}", f".. automodule:: transformer_nb.{mod}",
                "   :members:", "   :no-index:" if False else "", "```", ""]
    (src / "api.md").write_text("\n".join(api), encoding="utf-8")


def _node_modules() -> Path:
    "npm's mathjax-full (MathJax 3 for Node), installed once into `_build/npm`."
    cache = BUILD / "npm"
    if not (cache / "node_modules" / "mathjax-full" / "js" / "mathjax.js").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(cache),
                        f"mathjax-full@{MATHJAX_VERSION}"], check=True)
    return cache / "node_modules"


MATH = re.compile(r'<(span|div) class="math notranslate nohighlight"([^>]*)>(.*?)</\1>', re.S)
MATHJAX_SCRIPTS = re.compile(r'<script>window\.MathJax = .*?</script>\s*|<script [^>]*src="[^"]*mathjax/[^"]*"></script>\s*'
                             r'|<script [^>]*src="[^"]*scripts/fontawesome\.js[^"]*"></script>\s*', re.S)


def _tex(inner: str) -> tuple[str, bool]:
    "The TeX of one Sphinx math element, without its \\( \\) or \\[ \\] delimiters, and whether it is displayed."
    tex = html.unescape(inner).strip()
    for a, b in (("\\(", "\\)"), ("\\[", "\\]")):
        if tex.startswith(a) and tex.endswith(b):
            return tex[2:-2].strip(), a == "\\["
    return tex, True                                                      # amsmath environments come bare


def typeset_math(out: Path):
    "Replace every page's TeX with MathJax's SVG (one glyph cache per page) and drop the MathJax and Font Awesome scripts."
    pages = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.html")}
    equations = {name: [_tex(m[3]) for m in MATH.finditer(text)] for name, text in pages.items()}
    done = subprocess.run(["node", str(NBS / "sphinx" / "math_svg.js")], input=json.dumps({"pages": equations}),
                          capture_output=True, text=True, env=dict(os.environ, NODE_PATH=str(_node_modules())))
    if done.returncode:
        raise RuntimeError(f"typesetting the math failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    (out / "_static" / "mathjax-svg.css").write_text(result["css"], encoding="utf-8")
    for name, text in pages.items():
        svgs = iter(result["pages"][name]["math"])
        text = MATH.sub(lambda m: f'<{m[1]} class="math notranslate nohighlight"{m[2]}>{next(svgs)}</{m[1]}>', text)
        text = MATHJAX_SCRIPTS.sub("", text)
        if equations[name]:
            text = text.replace("</head>", '<link rel="stylesheet" href="_static/mathjax-svg.css" />\n</head>', 1)
            text = re.sub(r"(<body[^>]*>)", lambda m: m[1] + result["pages"][name]["cache"], text, count=1)
        (out / name).write_text(text, encoding="utf-8")


def prune(out: Path):
    "Files the pages no longer load: the theme's Font Awesome script (its icons come from the CSS font), its translations."
    for junk in [*out.rglob("*.map"), out / ".buildinfo", out / ".doctrees", out / "_sources", out / "_static" / "locales",
                 out / "_static" / "mathjax", *(out / "_static" / "scripts").glob("fontawesome.js*")]:
        if junk.is_dir():
            shutil.rmtree(junk)
        elif junk.exists():
            junk.unlink()


WEB = [ROOT / "web" / name for name in ("engine.js", "demo.js", "demo.css")]   # appendix 14's page


def web_assets(folder: Path):
    "The scripts of appendix 14's demo, and the shipped translator's weights in int8, which the demo loads on request."
    from transformer_nb.translator import PRETRAINED_TRANSLATOR, load_translator
    from transformer_nb.web import export_weights
    folder.mkdir(parents=True)
    for path in WEB:
        shutil.copy(path, folder / path.name)
    model, tokenizer, _ = load_translator(PRETRAINED_TRANSLATOR)
    export_weights(folder / "weights-int8.js", model, tokenizer, "int8")


def build():
    src, static = BUILD / "src", BUILD / "static"
    prepare_sources(src)
    if static.exists():
        shutil.rmtree(static)
    shutil.copytree(NBS / "sphinx" / "_static", static)
    web_assets(static / "web")
    out = BUILD / "html"
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ, TNB_DOCS_STATIC=str(static))
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(NBS / "sphinx"), str(src), str(out)],
                   check=True, env=env)
    typeset_math(out)
    prune(out)
    if DOCS.exists():
        shutil.rmtree(DOCS)
    shutil.copytree(out, DOCS)
    (DOCS / ".nojekyll").write_text("")
    (DOCS / "_notebook_hashes.json").write_text(json.dumps(notebook_hashes(), indent=1) + "\n")
    subprocess.run([sys.executable, str(NBS / "make_readme.py")], check=True)
    size = sum(p.stat().st_size for p in DOCS.rglob("*") if p.is_file())
    print(f"built {DOCS} ({size / 2**20:.1f} MB) and README.md", file=sys.stderr)


if __name__ == "__main__":
    build()
