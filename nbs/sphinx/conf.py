"""Sphinx configuration for the docs site. `python nbs/build_docs.py` prepares the sources and runs Sphinx with it;
see that script for the route (nbdev's notebook processing, then Sphinx + myst-nb, all offline)."""
import os

project = "transformer_nb"
author = "transformer_nb developers"
copyright = "2026 onwards, transformer_nb developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx_copybutton"]
root_doc = "index"
default_role = "code"                       # `name` in docstrings (markdown style) renders as code
exclude_patterns = ["_build", "**.ipynb_checkpoints", "notebooks"]   # notebooks/: the chapters as downloads

# notebooks: render the stored outputs, never execute
nb_execution_mode = "off"
nb_ipywidgets_js = {}                       # no require.js / widget scripts from a CDN
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "attrs_inline"]
myst_heading_anchors = 3                    # `### attention` -> #attention, the anchors nbdev's links use
# myst.xref_missing: links into show_doc output headings resolve in HTML (tests/test_docs.py checks every anchor)
suppress_warnings = ["myst.header", "misc.highlighting_failure", "mystnb.unknown_mime_type", "myst.xref_missing"]

# math: Sphinx writes TeX between \( \) and \[ \]; the build script typesets it into SVG with MathJax 3 under Node and
# removes the MathJax script tags (pages load no math script); a local path here, so that a tag left behind fails the
# asset test instead of loading MathJax from a CDN (Sphinx's default)
mathjax_path = "mathjax/typeset-at-build-time.js"

html_theme = "sphinx_book_theme"
# one sidebar: the chapters, then the open chapter's sections ("Contents"), so the text column can be wide
html_sidebars = {"**": ["navbar-logo.html", "search-button-field.html", "sbt-sidebar-nav.html", "page-toc.html"]}
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
    "home_page_in_toc": True,
    # no second sidebar on the right (html_sidebars puts the chapter's sections on the left), so the text column is
    # wide enough for a 120-character code line at 1300 px
    "secondary_sidebar_items": [],
    "show_toc_level": 2,
    "navbar_persistent": [],                # one search box (the sidebar's), not a second one in a header bar
}

# a copy button on every code cell (not on outputs); prompts such as "$ " are left out of the copied text
copybutton_selector = "div.cell_input pre, div.highlight-sh pre, div.highlight-bash pre, div.highlight-python pre"
copybutton_prompt_text = r"\$ |>>> "
copybutton_prompt_is_regexp = True

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_inherit_docstrings = False          # no nn.Module.forward boilerplate ("Define the computation performed ...")


def _dataclass_defaults(app, what, name, obj, options, signature, return_annotation):
    "A dataclass field with a default_factory shows as `= list()`, not autodoc's `= <factory>`."
    import dataclasses
    if signature and "<factory>" in signature and dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            if f.default_factory is not dataclasses.MISSING:
                signature = signature.replace(f"{f.name}: {f.type} = <factory>", f"{f.name}: {f.type} = "
                                              f"{getattr(f.default_factory, '__name__', 'factory')}()")
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _dataclass_defaults)
