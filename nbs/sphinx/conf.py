"""Sphinx configuration for the docs site. `python nbs/build_docs.py` prepares the sources and runs Sphinx with it;
see that script for the route (nbdev's notebook processing, then Sphinx + myst-nb, all offline)."""
import os

project = "transformer_nb"
author = "transformer_nb developers"
copyright = "2026 onwards, transformer_nb developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx_copybutton"]
root_doc = "index"
default_role = "code"                       # `name` in docstrings (markdown style) renders as code
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# notebooks: render the stored outputs, never execute
nb_execution_mode = "off"
nb_ipywidgets_js = {}                       # no require.js / widget scripts from a CDN
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "attrs_inline"]
myst_heading_anchors = 3                    # `### attention` -> #attention, the anchors nbdev's links use
# myst.xref_missing: links into show_doc output headings resolve in HTML (tests/test_docs.py checks every anchor)
suppress_warnings = ["myst.header", "misc.highlighting_failure", "mystnb.unknown_mime_type", "myst.xref_missing"]

# math: MathJax 3 from a local copy (the build script puts it in _static/mathjax), rendered as SVG: no web fonts
mathjax_path = "mathjax/tex-svg.js"
mathjax3_config = {"svg": {"fontCache": "global"}}

html_theme = "sphinx_book_theme"
html_title = "transformer_nb"
html_static_path = [os.environ.get("TNB_DOCS_STATIC", "_static")]
html_css_files = ["transformer_nb.css"]
html_favicon = "_static/favicon.svg"            # declared, so browsers do not ask the server for a missing /favicon.ico
html_copy_source = False
html_show_sourcelink = False
html_context = {"default_mode": "light"}    # an explicit mode: the theme logs a console error without one
html_theme_options = {
    "use_download_button": False,
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "home_page_in_toc": True,
}

# a copy button on every code cell (not on outputs); prompts such as "$ " are left out of the copied text
copybutton_selector = "div.cell_input pre, div.highlight-sh pre, div.highlight-bash pre, div.highlight-python pre"
copybutton_prompt_text = r"\$ |>>> "
copybutton_prompt_is_regexp = True

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
