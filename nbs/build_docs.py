"""Build the docs site into docs/ and regenerate README.md, offline. Run from anywhere: `python nbs/build_docs.py`.

Quarto cannot run here, so this replaces `nbdev_docs`:
1. nbdev processes the notebooks (`nbdev.serve.proc_nbs`: applies `#| hide`, adds `show_doc` for exported symbols,
   writes front matter with each page's `output-file`) into `_proc/`.
2. Each processed notebook is adapted for Sphinx + myst-nb: named after its nbdev output file (`02_attention.ipynb`
   -> `attention.ipynb`, so nbdev's links `attention.html#attention` resolve), title from its front matter, nbdev cell
   directives mapped to myst-nb tags, SVG charts inlined, links to the docs host made relative.
   The diagrams in `nbs/images/` (SVG, drawn by `nbs/images/draw.py`) are copied beside them.
3. Sphinx + myst-nb (outputs rendered, never executed) + sphinx-book-theme render the site into `docs/`, with
   MathJax from a local copy (npm package `mathjax@3`, SVG output: no web fonts) and an autodoc API page.
4. `docs/_notebook_hashes.json` records a hash of every source the site was built from (notebooks, Sphinx
   configuration, this script); a test compares it.
"""
import hashlib
import json
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
        "code-fold: true": "hide-input"}
API_MODULES = ["embedding", "masks", "attention", "layers", "model", "training", "decoding", "copy_task", "interop", "translation", "cli"]


def notebook_hashes() -> dict:
    "sha256 of everything the site is built from: the notebooks, the Sphinx configuration and this script."
    folders = [NBS / "sphinx", NBS / "images"]
    sources = [*NBS.glob("*.ipynb"), *(p for d in folders for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
               Path(__file__)]
    return {p.relative_to(NBS).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(sources)}


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
    cell["source"] = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/svg+xml" in data:                                    # inline the chart: an <svg> in the page itself
            svg = _text(data.pop("image/svg+xml"))
            data.pop("text/plain", None)
            data["text/html"] = f'<div class="tnb-chart">{svg}</div>'
        if "text/markdown" in data:                                     # show_doc output
            md = _text(data["text/markdown"]).lstrip()
            md = md[3:] if md.startswith("---") else md                 # its leading rule ("---") breaks docutils
            md = re.sub(r"^(#+) (.+)$", lambda m: f'<a id="{m[2].strip().lower()}"></a>\n\n{m[0]}', md,
                        count=1, flags=re.M)                            # nbdev's anchor (`#run_epoch`); docutils would make it run-epoch
            md = re.sub(r'\[source\]\((\S+?)\)\{target="_blank" style="float:right; font-size:smaller"\}',
                        r'<a class="tnb-source" href="\1" target="_blank" rel="noopener">source</a>', md)  # myst does not parse these attributes
            data["text/markdown"] = md.replace(DOC_HOST, "")             # output markdown keeps plain .html links
    return cell


def prepare_sources(src: Path):
    "Process the notebooks with nbdev and write Sphinx sources into `src`."
    from nbdev.serve import proc_nbs
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
        cells = [{"cell_type": "markdown", "id": "tnb-title", "metadata": {}, "source": head}] + [_adapt_cell(c, page_names) for c in cells]
        page = page_names[path.name]
        if page == "index":
            toc = "\n".join(p for p in page_names.values() if p != "index")
            cells.append({"cell_type": "markdown", "id": "tnb-toc", "metadata": {},
                          "source": "## Reference\n\nThe [API reference](api.md) lists every public function and class, "
                                    "generated from the docstrings.\n\n"
                                    f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toc}\napi\n```\n"})
        else:
            pages.append(page)
        nb["cells"] = cells
        nb["metadata"] = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                          "language_info": {"name": "python"}}
        (src / f"{page}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    api = ["# API reference", "", "Every public name of the package, from its docstrings. The chapters explain them.", ""]
    for mod in API_MODULES:
        api += [f"## `transformer_nb.{mod}`", "", "```{eval-rst}", f".. automodule:: transformer_nb.{mod}",
                "   :members:", "   :no-index:" if False else "", "```", ""]
    (src / "api.md").write_text("\n".join(api), encoding="utf-8")


def mathjax(static: Path):
    "Copy MathJax's SVG bundle (and the TeX extensions it may load on demand) into `static/mathjax`."
    cache = BUILD / "npm"
    package = cache / "node_modules" / "mathjax" / "es5"
    if not (package / "tex-svg.js").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(cache),
                        f"mathjax@{MATHJAX_VERSION}"], check=True)
    target = static / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(package / "tex-svg.js", target / "tex-svg.js")
    shutil.copytree(package / "input" / "tex" / "extensions", target / "input" / "tex" / "extensions", dirs_exist_ok=True)


def build():
    src, static = BUILD / "src", BUILD / "static"
    prepare_sources(src)
    if static.exists():
        shutil.rmtree(static)
    shutil.copytree(NBS / "sphinx" / "_static", static)
    mathjax(static)
    out = BUILD / "html"
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ, TNB_DOCS_STATIC=str(static))
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(NBS / "sphinx"), str(src), str(out)],
                   check=True, env=env)
    for junk in [*out.rglob("*.map"), out / ".buildinfo", out / ".doctrees", out / "_sources"]:
        if junk.is_dir():
            shutil.rmtree(junk)
        elif junk.exists():
            junk.unlink()
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
