"""The committed docs site: current with the notebooks, internally linked, small, and working in a real browser.

The browser test drives Debian's chromium through playwright (never `playwright install`). Every page is opened
both from a local static server on 127.0.0.1 and from file://. On failure it saves a screenshot and the collected
errors under test-artifacts/docs/.
"""
import functools
import http.server
import json
import os
import re
import runpy
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse, unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ARTIFACTS = ROOT / "test-artifacts" / "docs"
CHROMIUM = "/usr/bin/chromium"
PAGES = sorted(p.name for p in DOCS.glob("*.html"))
CHAPTERS = [re.sub(r"^\d+_", "", p.stem) + ".html" for p in sorted((ROOT / "nbs").glob("[0-9]*.ipynb"))]
FIRST_LOAD_BUDGET = 2.5 * 2**20     # bytes a chapter may fetch when it is first opened (page, scripts, styles, images)
DESKTOP, PHONE = {"width": 1300, "height": 900}, {"width": 390, "height": 844}


def test_the_api_page_covers_every_public_module():
    "Every module of the package (not the private `_modidx`) has its section on the API page, with its functions."
    modules = sorted(p.stem for p in (ROOT / "transformer_nb").glob("[a-z]*.py"))
    html = (DOCS / "api.html").read_text(encoding="utf-8")
    missing = [m for m in modules if f'id="module-transformer_nb.{m}"' not in html]
    assert len(modules) > 20 and not missing, f"docs/api.html lacks {missing}: rebuild the docs (python nbs/build_docs.py)"
    assert 'id="transformer_nb.decoding.beam_search"' in html and 'id="transformer_nb.distributed.World"' in html


def test_docs_are_current():
    "docs/ must be rebuilt (python nbs/build_docs.py) whenever a notebook, the Sphinx configuration or the build script changes."
    built = json.loads((DOCS / "_notebook_hashes.json").read_text())
    current = runpy.run_path(str(ROOT / "nbs" / "build_docs.py"))["notebook_hashes"]()
    stale = sorted(set(built) ^ set(current) | {k for k in built.keys() & current.keys() if built[k] != current[k]})
    assert not stale, f"docs/ is stale for {stale}: run `python nbs/build_docs.py` and commit docs/"


def test_site_files():
    assert (DOCS / ".nojekyll").exists()
    assert not list(DOCS.rglob("*.map"))
    size = sum(p.stat().st_size for p in DOCS.rglob("*") if p.is_file())
    assert size < 30 * 2**20, f"docs/ is {size / 2**20:.1f} MB"
    for page in ["index.html", "api.html", *CHAPTERS]:
        assert page in PAGES, page


def test_no_unrendered_markdown():
    "Markdown that Sphinx did not understand shows up as literal text, e.g. show_doc's `{target=...}` link attributes."
    for page in PAGES:
        html = (DOCS / page).read_text(encoding="utf-8")
        prose = re.sub(r"<(pre|code|script)\b.*?</\1>", "", html, flags=re.S)    # code may contain anything
        for leftover in ("{target=", "](http", "](#", ".ipynb)"):
            assert leftover not in prose, f"{page} shows unrendered markdown {leftover!r}"


def test_pages_load_no_math_or_icon_script():
    "The math is SVG in the page (typeset when the site is built) and icons come from a CSS font: no MathJax or Font Awesome script."
    for page in PAGES:
        html = (DOCS / page).read_text(encoding="utf-8")
        scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
        assert not [s for s in scripts if "mathjax" in s.lower() or "fontawesome" in s], f"{page} loads {scripts}"
        tex_left = re.findall(r'class="math notranslate nohighlight"[^>]*>(?!<mjx-container)(.{0,40})', html)
        assert not tex_left, f"{page}: math not typeset: {tex_left[:3]}"


def test_sidebar_numbers_chapters_and_download_links():
    """The sidebar lists the chapters, then the appendices, numbered in the order a reader meets them (00, 01, ... with
    no gap), each as its notebook is numbered; each chapter links its notebook."""
    nbs = {p.name for p in (ROOT / "nbs").glob("[0-9][0-9]_*.ipynb")}
    html = (DOCS / "index.html").read_text(encoding="utf-8")
    nav = html[html.index('bd-docs-nav'):]
    for caption in ("Chapters", "Appendices", "Reference"):
        assert f'<span class="caption-text">{caption}</span>' in nav, caption
    chapters = nav[nav.index(">Chapters<"):nav.index(">Appendices<")]
    appendices = nav[nav.index(">Appendices<"):nav.index(">Reference<")]
    assert "interop.html" in appendices and "cli.html" in appendices and "attention.html" not in appendices
    assert "translation.html" in chapters and "own_task.html" in chapters and "fit.html" not in chapters
    assert "distributed.html" in appendices and "distributed.html" not in chapters
    assert re.search(r'href="attention.html">02 Attention</a>', nav)
    numbers = [int(n) for n in re.findall(r'href="[a-z_]+\.html">(\d\d) ', chapters + appendices)]
    assert numbers == list(range(len(nbs))), f"the sidebar's numbers, in its order: {numbers}"
    assert [int(name[:2]) for name in sorted(nbs)] == list(range(len(nbs))), sorted(nbs)
    for page in CHAPTERS:
        links = [l for l in _parse(DOCS / page).links if l.endswith(".ipynb")]
        assert len(links) == 1 and Path(unquote(links[0])).name in nbs, f"{page}: notebook links {links}"
        assert (DOCS / unquote(links[0])).read_bytes() == (ROOT / "nbs" / Path(unquote(links[0])).name).read_bytes()


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links, self.sources = set(), [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        for key in ("src", "href") if tag in ("script", "link", "img") else ():
            if a.get(key):
                self.sources.append(a[key])


@functools.lru_cache(maxsize=None)
def _parse(path: Path):
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.mark.parametrize("page", PAGES)
def test_internal_links_and_assets_resolve(page):
    "Every local link points to an existing page and anchor; every script, style and image is a local file."
    parsed = _parse(DOCS / page)
    for href in parsed.links:
        url = urlparse(href)
        if url.scheme or href.startswith("mailto:"):
            continue
        target = DOCS / unquote(url.path) if url.path else DOCS / page
        assert target.exists(), f"{page}: link to missing {href}"
        if url.fragment and target.suffix == ".html":
            assert url.fragment in _parse(target).ids, f"{page}: link to missing anchor {href}"
    for src in parsed.sources:
        url = urlparse(src)
        assert not url.scheme and not src.startswith("//"), f"{page}: loads {src} from outside the site"
        assert (DOCS / unquote(url.path)).exists(), f"{page}: missing asset {src}"


# ---- the real browser ----

def _browser_or_skip():
    "playwright's sync API, or a skip with the reason (a failure when TNB_REQUIRE_BROWSER is set, as in .ci/run)."
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is not installed (apt-get install chromium); .ci/run installs it"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = missing or "python playwright is not installed (pip install -e '.[dev]')"
    if missing:
        if os.environ.get("TNB_REQUIRE_BROWSER"):
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_playwright


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(DOCS))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                                             "--disable-component-update", "--no-first-run"])
        yield b
        b.close()


CHECK_PAGE = """async () => {
  const wait = (ms) => new Promise(r => setTimeout(r, ms));
  for (let i = 0; i < 100 && window.MathJax && !(MathJax.startup && MathJax.startup.promise); i++) await wait(50);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  // sphinx-copybutton adds its buttons on DOMContentLoaded; on a loaded machine that can come after network idle
  const want = document.querySelectorAll('div.cell_input pre').length;
  for (let i = 0; i < 200 && document.querySelectorAll('div.cell_input .copybtn').length < want; i++) await wait(50);
  const charts = [...document.querySelectorAll('.tnb-chart')];
  const math = [...document.querySelectorAll('.math')];
  return {
    charts: charts.length,
    undrawn: charts.filter(c => !c.querySelector('svg, canvas') || c.getBoundingClientRect().height < 20).length,
    math: math.length,
    untypeset: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 60)),
    nav: [...document.querySelectorAll('nav a, .bd-sidebar a')].map(a => a.getAttribute('href')),
    code: document.querySelectorAll('div.cell_input pre').length,
    copyButtons: document.querySelectorAll('div.cell_input .copybtn').length,
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
    // nbdev 2.4's cards drew classes as functions (`def Embeddings(`): no code block may show one
    classAsDef: [...document.querySelectorAll('pre')].filter(p => /^def [A-Z]\\w*\\(/m.test(p.textContent)).length,
  };
}"""

# at 1300 px: no code block or output needs sideways scrolling
DESKTOP_LAYOUT = """() => [...document.querySelectorAll('.bd-article pre')]
  .filter(p => p.scrollWidth > p.clientWidth + 1)
  .map(p => p.textContent.split('\\n').reduce((a, l) => l.length > a.length ? l : a, '').slice(0, 80))"""

# at 390 px: nothing widens the page, no equation, chart or image is cut off (wider ones scroll by themselves), and
# chart labels stay legible
PHONE_LAYOUT = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (e) => { for (let p = e.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if ((o === 'auto' || o === 'scroll') && p.getBoundingClientRect().right <= width + 1) return true; } return false; };
  const clipped = [...document.querySelectorAll('.bd-article mjx-container, .bd-article .tnb-chart svg, .bd-article img')]
    .filter(e => e.getBoundingClientRect().right > width + 1 && !scrolls(e))
    .map(e => e.tagName + ' ' + ((e.closest('.math') && e.querySelector('svg')?.getAttribute('aria-label')) || e.getAttribute('src') || '').slice(0, 50));
  // chart text drawn smaller than 8 px (a wide chart shrunk to the screen) cannot be read
  const tiny = [...document.querySelectorAll('.bd-article .tnb-chart svg')].filter(svg => {
    const scale = svg.getBoundingClientRect().width / (svg.width.baseVal.value || 1);
    const sizes = [...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
    return sizes.length && Math.min(...sizes) < 8;
  }).length;
  return {pageWidth: document.documentElement.scrollWidth, width: width, clipped: clipped, tinyCharts: tiny};
}"""


@pytest.mark.parametrize("mode", ["http", "file"])
def test_every_page_in_a_browser(browser, server, mode):
    problems, summary = [], []
    for page in PAGES:
        if page in ("genindex.html", "search.html", "py-modindex.html"):
            continue
        ctx = browser.new_context(viewport=DESKTOP)
        tab = ctx.new_page()
        errors, outside, fetched = [], [], []
        base = server if mode == "http" else DOCS.as_uri()
        origin = urlparse(server).netloc
        tab.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(f"page error: {e}"))

        def on_request(req, outside=outside):
            u = urlparse(req.url)
            if u.scheme in ("data", "blob", "about"):
                return
            if (mode == "http" and u.netloc != origin) or (mode == "file" and u.scheme != "file"):
                outside.append(req.url)
        tab.on("request", on_request)
        # a missing file is an error whether or not the browser gets round to logging it before we look
        tab.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        tab.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
        tab.on("requestfinished", lambda r: fetched.append(r))
        tab.goto(f"{base}/{page}", wait_until="networkidle")  # idle: late requests such as the favicon are in
        info = tab.evaluate(CHECK_PAGE)
        bad = errors + [f"request outside the site: {u}" for u in outside]
        if mode == "http":
            size = sum(r.sizes()["responseBodySize"] for r in fetched)
            if size > FIRST_LOAD_BUDGET:
                bad.append(f"first load fetches {size / 2**20:.2f} MB (budget {FIRST_LOAD_BUDGET / 2**20} MB)")
        if info["classAsDef"]:
            bad.append(f"{info['classAsDef']} code blocks show a class as `def Name(`")
        scrolling = tab.evaluate(DESKTOP_LAYOUT)
        if scrolling:
            bad.append(f"{len(scrolling)} code blocks scroll sideways at {DESKTOP['width']} px: {scrolling[:3]}")
        if info["undrawn"]:
            bad.append(f"{info['undrawn']} of {info['charts']} charts not drawn")
        if info["untypeset"]:
            bad.append(f"math not typeset: {info['untypeset'][:3]}")
        if info["copyButtons"] < info["code"]:
            bad.append(f"{info['code'] - info['copyButtons']} of {info['code']} code cells without a copy button")
        if info["brokenImages"]:
            bad.append(f"images that did not load: {info['brokenImages']}")
        missing_nav = [c for c in CHAPTERS if c != page and not any(h and h.split("#")[0].endswith(c) for h in info["nav"])]
        if missing_nav:
            bad.append(f"navigation lacks {missing_nav}")
        tab.set_viewport_size(PHONE)
        phone = tab.evaluate(PHONE_LAYOUT)
        if phone["pageWidth"] > phone["width"]:
            bad.append(f"at {PHONE['width']} px the page is {phone['pageWidth']} px wide")
        if phone["clipped"]:
            bad.append(f"cut off at {PHONE['width']} px: {phone['clipped'][:3]}")
        if phone["tinyCharts"]:
            bad.append(f"{phone['tinyCharts']} charts with labels under 8 px at {PHONE['width']} px")
        summary.append(f"{page}: {info['charts']} charts, {info['math']} math")
        if bad:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / f"{mode}-{page}.png"
            tab.screenshot(path=str(shot), full_page=True)
            (ARTIFACTS / f"{mode}-{page}.txt").write_text("\n".join(bad))
            problems.append(f"{page}: {bad} (screenshot {shot.relative_to(ROOT)})")
        ctx.close()
    assert not problems, "\n".join(problems)
    assert any("charts" in s and not s.split(": ")[1].startswith("0 charts") for s in summary)


@pytest.fixture(scope="module")
def int8_translation():
    "What Python translates for the demo's first sentence with the weights the page computes with (int8, one at a time)."
    import torch
    from transformer_nb.translator import load_pretrained, translate
    from transformer_nb.web import _dequantized_model
    torch.set_num_threads(1)
    model, tokenizer, _ = load_pretrained()
    sentence = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    return sentence, translate(_dequantized_model(model, "int8"), tokenizer, [sentence], 5, 1.2, batch_size=1)[0]


@pytest.mark.parametrize("mode", ["http", "file"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1300px", "390px"])
def test_the_browser_chapter_translates_and_shows_every_map(browser, server, mode, viewport, int8_translation):
    """Appendix 14's demo: the weights load only on request, the first test sentence comes out as Python translates it,
    every map of the chosen layer is drawn (hovering a cell names both tokens and the weight), and nothing widens the page."""
    from playwright.sync_api import expect
    sentence, expected = int8_translation
    ctx = browser.new_context(viewport=viewport)
    tab = ctx.new_page()
    errors, fetched = [], []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("request", lambda r: fetched.append(r.url))
    tab.goto(f"{server if mode == 'http' else DOCS.as_uri()}/browser.html", wait_until="networkidle")
    assert not any("weights" in u for u in fetched), "the weights load before the reader asks for them"
    tab.get_by_role("button", name="Load the model").click()
    tab.wait_for_function("document.querySelectorAll('.tnb-map').length > 0", timeout=60_000)
    demo = tab.locator("#tnb-demo")
    assert tab.input_value("#tnb-demo textarea") == sentence
    assert demo.locator(".tnb-demo-output").inner_text() == expected
    heads = tab.evaluate("window.transformerNbWeights.config.h")
    expect(demo.locator("table.tnb-map")).to_have_count(heads)              # "all heads" of layer 1, drawn one by one
    demo.locator("table.tnb-map td").nth(5).hover()
    assert re.fullmatch(r".+ → .+: [01]\.\d{3}", demo.locator(".tnb-demo-cell").inner_text())
    for kind in ("encoder", "decoder_self", "cross"):                       # every kind and layer can be shown
        demo.locator("select").nth(2).select_option(kind)
        for layer in range(tab.evaluate("window.transformerNbWeights.config.N")):
            demo.locator("select").nth(3).select_option(str(layer))
            expect(demo.locator("table.tnb-map")).to_have_count(heads)
    width = tab.evaluate("document.documentElement.scrollWidth")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    demo.screenshot(path=str(ARTIFACTS / f"demo-{mode}-{viewport['width']}.png"))
    ctx.close()
    assert width <= viewport["width"], f"the page is {width} px wide at {viewport['width']} px"
    assert not errors, errors
