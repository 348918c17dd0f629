"""Write README.md from nbs/index.ipynb (Quarto, which `nbdev_readme` needs, cannot run offline).

Markdown cells are copied as they are (image links pointed at nbs/images/); visible code cells become ```python blocks followed by their
text output; cells marked `#| hide`, `#| include: false` or `#| echo: false` are left out.
Run from anywhere: `python nbs/make_readme.py`.
"""
import json
import sys
from pathlib import Path

NBS = Path(__file__).resolve().parent
ROOT = NBS.parent
HEADER = "<!-- Generated from nbs/index.ipynb by nbs/make_readme.py: edit the notebook, not this file. -->\n\n"
HIDDEN = ("#| hide", "#| include: false", "#| echo: false")


def _text(src):
    return "".join(src) if isinstance(src, list) else src


def _directives(source: str) -> set:
    return {line.strip() for line in source.splitlines() if line.startswith("#|")}


def _outputs(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            parts.append(_text(o["text"]))
        elif "data" in o and "text/plain" in o["data"] and o["output_type"] == "execute_result":
            parts.append(_text(o["data"]["text/plain"]) + "\n")
    return "".join(parts)


def render_readme(nb_path: Path = NBS / "index.ipynb") -> str:
    "The README text for the notebook at `nb_path`."
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    blocks = []
    for cell in nb["cells"]:
        source = _text(cell["source"]).strip("\n")
        if cell["cell_type"] == "markdown":
            blocks.append(source.replace("](images/", "](nbs/images/"))   # the diagrams live beside the notebooks
        elif cell["cell_type"] == "code" and not (_directives(source) & set(HIDDEN)):
            code = "\n".join(l for l in source.splitlines() if not l.startswith("#|"))
            blocks.append(f"```python\n{code}\n```")
            out = _outputs(cell).rstrip("\n")
            if out:
                blocks.append(f"```\n{out}\n```")
    return HEADER + "\n\n".join(blocks) + "\n"


if __name__ == "__main__":
    target = ROOT / "README.md"
    target.write_text(render_readme(), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
