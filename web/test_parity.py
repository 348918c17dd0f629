"""Parity of engine.js (in Debian's chromium, driven by playwright) with the PyTorch package.

Run:  python -m pytest -q web/test_parity.py   (part of the repository's `pytest`; chromium as for tests/test_docs.py)

The model is the translator the package ships (reference.CHECKPOINT; $TRANSFORMER_NB_CKPT to choose another). Its
weights are exported (`transformer_nb.web.export_weights`) into build/ at the start, in int8 and float16, and every check runs
on two pages served over http://, one for each; from file://, each weights file loads and the page gives PyTorch's
greedy and beam tokens for a few sentences, and the architecture variants (random models, int8) run. PyTorch's references use
`_dequantized_model(model, dtype)`: the float32 weights the browser computes with.

(a) tokenizer: ids and decoded text equal Python's on every Multi30k validation and test sentence, German and English;
    the character classes behind pre_tokenize equal Python's `\\w` and `str.isspace` on every code point (up to
    characters that Python's older Unicode database does not know); edge cases of pre_tokenize.
(b) 20 test sentences: greedy tokens equal `greedy_decode`'s, every attention map within 1e-4 of `attention_maps`'s
    on the same tokens, beam search (5 / 1.2 and 4 / 0.6) tokens equal `beam_search`'s.
(c) no console error and no uncaught exception on the page.
"""
from __future__ import annotations

import functools
import http.server
import os
from pathlib import Path
import re
import sys
import threading
import unicodedata

import numpy as np
import pytest
import torch
from playwright.sync_api import expect, sync_playwright

from transformer_nb.web import _DTYPES, _dequantized_model, export_weights
from reference import HERE, load_model, multi30k, torch_beam, torch_greedy, torch_maps
from transformer_nb.embedding import sinusoidal_encoding

BUILD = HERE / "build"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TOLERANCE = 1e-4
BEAMS = [(5, 1.2), (4, 0.6)]                   # the recipe's beam search, and the paper's

torch.set_num_threads(1)


def parity_sentences() -> list[str]:
    "20 German test sentences, spread over the test set (every 50th)."
    return [de for de, _ in multi30k("test")[::50][:20]]


# ---------------------------------------------------------------------------------------------------------------
# Fixtures: the model and its exports, PyTorch's answers, a web server, the browser, the pages
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def model_and_tokenizer():
    model, tokenizer, description = load_model()
    print(f"\nparity model: {description}", file=sys.stderr)
    for dtype in _DTYPES:                                    # the weights scripts the pages load
        export_weights(BUILD / f"weights-{dtype}.js", model, tokenizer, dtype)
    return model, tokenizer


class Reference:
    "PyTorch's answers for one storage dtype, computed on first use and kept."
    def __init__(self, model, tokenizer, dtype):
        self.model, self.tokenizer = _dequantized_model(model, dtype), tokenizer

    @functools.lru_cache(maxsize=None)
    def greedy(self, sentence):
        return torch_greedy(self.model, self.tokenizer, sentence)

    @functools.lru_cache(maxsize=None)
    def beam(self, sentence, beam, alpha):
        return torch_beam(self.model, self.tokenizer, sentence, beam, alpha)

    def maps(self, src_ids, out_ids):
        return torch_maps(self.model, self.tokenizer, src_ids, out_ids)


@pytest.fixture(scope="session")
def references(model_and_tokenizer):
    return {dtype: Reference(*model_and_tokenizer, dtype) for dtype in _DTYPES}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def http_root():
    "python's http.server on a free port, serving this folder, in a thread."
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(HERE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("TNB_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} is not installed (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Page:
    "A loaded test page, with the errors it reported."
    def __init__(self, page, dtype):
        self.page, self.dtype, self.errors = page, dtype, []
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(f"console: {msg.text}"))
        page.on("pageerror", lambda exc: self.errors.append(f"exception: {exc}"))

    def js(self, expression, arg=None):
        return self.page.evaluate(expression, arg)


def open_page(browser, base: str, dtype: str) -> Page:
    "test.html with the `dtype` weights, from `base` (a file:// folder or the http:// server), once it is ready."
    p = Page(browser.new_page(), dtype)
    p.page.goto(f"{base}test.html?weights=build/weights-{dtype}.js")
    info = p.js("() => window.ready")
    assert info["dtype"] == dtype
    assert info["kernel"] == "WebAssembly", "Chromium should run the linear layers in WebAssembly"
    return p


@pytest.fixture(scope="module", params=_DTYPES, ids=lambda d: f"http-{d}")
def page(request, browser, http_root, model_and_tokenizer):
    p = open_page(browser, http_root, request.param)
    yield p
    p.page.close()


# ---------------------------------------------------------------------------------------------------------------
# (a) The tokenizer
# ---------------------------------------------------------------------------------------------------------------
def test_weights_are_the_dequantized_ones(page, references):
    "Every tensor the browser holds equals, bit for bit, the same tensor of `_dequantized_model` (checksums)."
    js = page.js("""() => {
        const out = {};
        for (const [name, values] of translator.parameters) {      // weighted sum of the float32 bit patterns
            const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
            let sum = 0;
            for (let i = 0; i < bits.length; i++) sum = (sum + Math.imul(bits[i], (i % 65521) + 1)) >>> 0;
            out[name] = [values.length, sum];
        }
        return out;
    }""")
    model = references[page.dtype].model
    for name, p in model.named_parameters(remove_duplicate=False):
        bits = p.detach().numpy().astype(np.float32).ravel().view(np.uint32).astype(np.uint64)
        weights = np.arange(bits.size, dtype=np.uint64) % 65521 + 1
        expected = int(((bits * weights) % 2**32).sum() % 2**32)
        assert js[name] == [p.numel(), expected], name


def test_positional_encoding(page, model_and_tokenizer):
    "engine.js's sinusoidal rows equal `sinusoidal_encoding` (float64, then float32) for the first 200 positions."
    d_model = model_and_tokenizer[0].config.d_model
    js = page.js("(d) => Array.from({length: 200}, (_, p) => Array.from(transformerNb.internals.sinusoidalEncoding(p, d)))",
                 d_model)
    assert torch.equal(torch.tensor(js, dtype=torch.float32), sinusoidal_encoding(200, d_model))


def all_multi30k_sentences() -> list[str]:
    return [s for split in ("val", "test") for pair in multi30k(split) for s in pair]


def test_tokenizer_on_every_sentence(page, model_and_tokenizer):
    tokenizer = model_and_tokenizer[1]
    texts = all_multi30k_sentences()
    js_ids = page.js("(texts) => texts.map((t) => translator.tokenizer.encode(t, true, true))", texts)
    py_ids = [tokenizer.encode(t, True, True) for t in texts]
    mismatched = [t for t, a, b in zip(texts, js_ids, py_ids) if a != b]
    assert not mismatched, f"{len(mismatched)} of {len(texts)} differ, first: {mismatched[0]!r}"
    js_text = page.js("(ids) => ids.map((x) => translator.tokenizer.decode(x))", py_ids)
    assert js_text == [tokenizer.decode(x) for x in py_ids]


def test_decode_skips_and_stops(page, model_and_tokenizer):
    "decode on id lists holding <pad>, <s>, </s> and <unk> anywhere (random, seeded)."
    tokenizer = model_and_tokenizer[1]
    rng = np.random.default_rng(0)
    lists = [rng.integers(0, len(tokenizer), rng.integers(0, 30)).tolist() for _ in range(300)]
    lists += [[5, 0, 6, 1, 7], [2, 9], [], [0, 0], [tokenizer.unk, 10]]
    js = page.js("(ids) => ids.map((x) => translator.tokenizer.decode(x))", lists)
    assert js == [tokenizer.decode(x) for x in lists]


EDGE_CASES = [
    "Hallo,Welt!", "  zwei  Leerzeichen  ", "\tTab\nund Zeile", "über_all 3,5 Äpfel", "x\u0085y", "a\u00a0b",
    "\ufeffBOM", "e\u0301 kombiniert", "Emoji 😀 und 👍🏽!", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ²³ ½ Ⅻ", "日本語のテキスト。", "x\x1cy\x1fz",
    "--- ... !!!", "Straße—„Zitat“", "a_b_c __init__", "", "   ", "Zeile\u2028Trenner\u3000Ende",
]


def test_pre_tokenize_edge_cases(page, model_and_tokenizer):
    from transformer_nb.tokenizer import pre_tokenize
    tokenizer = model_and_tokenizer[1]
    js = page.js("(texts) => texts.map((t) => [transformerNb.internals.preTokenize(t), "
                 "translator.tokenizer.encode(t, true, true)])", EDGE_CASES)
    assert js == [[pre_tokenize(t), tokenizer.encode(t, True, True)] for t in EDGE_CASES]


def test_character_classes_on_every_code_point(page):
    """`\\w` and whitespace as engine.js spells them, against Python, for all 1,114,112 code points. Word characters
    may differ only where Python's Unicode database (older than the browser's) has no character at all."""
    js_word, js_space = page.js("""() => {
        const word = new RegExp("^[\\\\p{L}\\\\p{N}_]$", "u"), space = transformerNb.internals.IS_SPACE;
        const w = [], s = [];
        for (let c = 0; c < 0x110000; c++) {
            if (c >= 0xd800 && c < 0xe000) continue;                       // surrogates: no character
            const ch = String.fromCodePoint(c);
            if (word.test(ch)) w.push(c);
            if (space.test(ch)) s.push(c);
        }
        return [w, s];
    }""")
    import re
    word = re.compile(r"\w")
    codes = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000]
    py_word = {c for c in codes if word.match(chr(c))}
    py_space = {c for c in codes if chr(c).isspace()}
    assert set(js_space) == py_space
    assert py_word <= set(js_word), "a character is a word character in Python and not in engine.js"
    newer = set(js_word) - py_word
    assert all(unicodedata.category(chr(c)) == "Cn" for c in newer)
    print(f"\n{len(newer)} code points are letters or digits for the browser but unassigned in Python's "
          f"Unicode {unicodedata.unidata_version}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------------
# (b) Decoding and attention maps
# ---------------------------------------------------------------------------------------------------------------
def js_translate(page, sentences, beam, alpha):
    return page.js("async ([texts, beam, alpha]) => { const out = [];"
                   " for (const t of texts) out.push(await translator.translate(t, {beam, lengthPenalty: alpha, attention: true}));"
                   " return out; }", [sentences, beam, alpha])


def check_maps(reference, result):
    "Every map of `result` (engine.js) within TOLERANCE of `attention_maps` on the same tokens; returns the worst."
    expected = reference.maps(result["srcTokens"], result["tokens"])
    worst = 0.0
    for kind, layers in expected.items():
        assert len(result["attention"][kind]) == len(layers), kind
        for layer, (want, got) in enumerate(zip(layers, result["attention"][kind])):
            got = torch.tensor(got, dtype=torch.float64)
            assert got.shape == want.shape, (kind, layer)
            err = (got - want).abs().max().item()
            assert err <= TOLERANCE, f"{kind} layer {layer}: {err}"
            worst = max(worst, err)
    return worst


def test_greedy_tokens_and_attention_maps(page, references):
    reference, sentences = references[page.dtype], parity_sentences()
    results = js_translate(page, sentences, 1, 0.6)
    worst = 0.0
    for sentence, result in zip(sentences, results):
        assert result["tokens"] == reference.greedy(sentence), sentence
        assert result["text"] == reference.tokenizer.decode(result["tokens"])
        worst = max(worst, check_maps(reference, result))
    print(f"\n[{page.dtype}] greedy: 20/20 equal; largest attention difference {worst:.2e}", file=sys.stderr)


@pytest.mark.parametrize("beam,alpha", BEAMS, ids=lambda v: str(v))
def test_beam_search_tokens(page, references, beam, alpha):
    reference, sentences = references[page.dtype], parity_sentences()
    results = js_translate(page, sentences, beam, alpha)
    worst_score, worst_map = 0.0, 0.0
    for sentence, result in zip(sentences, results):
        tokens, score = reference.beam(sentence, beam, alpha)
        assert result["tokens"] == tokens, sentence
        worst_score = max(worst_score, abs(result["score"] - score))
        worst_map = max(worst_map, check_maps(reference, result))
    assert worst_score <= TOLERANCE
    print(f"\n[{page.dtype}] beam {beam} / {alpha}: 20/20 equal; largest score difference {worst_score:.2e}, "
          f"attention {worst_map:.2e}", file=sys.stderr)


REFUSALS = ["", "   ", "Hallo\x01 Welt", "Hallo\x7f Welt", "\u0085Ein Hund.", "☃☃ ☃", "\u2581 \u2581", "a " * 5000]  # Python refuses each
ACCEPTED = ["Hallo\tWelt\n", "Ein Hund ☃."]


def test_translate_refuses_what_python_refuses(page, references):
    "translate() checks its sentence as translator.py does: the same sentences are refused, the same accepted."
    from transformer_nb.translator import translate
    reference = references[page.dtype]
    for text in REFUSALS + ACCEPTED:
        try:
            translate(reference.model, reference.tokenizer, [text])
            python_ok = True
        except ValueError:
            python_ok = False
        js_ok = page.js("(t) => { try { translator.translate(t); return true; } catch (e) { return false; } }", text)
        assert (python_ok, js_ok) == (text in ACCEPTED, text in ACCEPTED), repr(text[:20])


VARIANTS = {"pre_norm-no_bias-untied": dict(pre_norm=True, bias=False, tie_weights=False, share_embeddings=False),
            "post_norm-final_norm": dict(final_norm=True)}


@pytest.mark.parametrize("variant", VARIANTS)
def test_other_architectures(browser, variant):
    """The switches the recipe does not use, on small random models: pre-norm (with its final LayerNorm), no biases,
    separate embeddings and output projection; a final LayerNorm after post-norm layers."""
    from reference import random_model
    model, tokenizer = random_model(seed=1, **VARIANTS[variant])
    export_weights(BUILD / f"variant-{variant}.js", model, tokenizer, "int8")
    reference, page = Reference(model, tokenizer, "int8"), Page(browser.new_page(), "int8")
    page.page.goto(f"{HERE.as_uri()}/test.html?weights=build/variant-{variant}.js")
    page.js("() => window.ready")
    sentences = parity_sentences()[:5]
    for result, sentence in zip(js_translate(page, sentences, 1, 0.6), sentences):
        assert result["tokens"] == reference.greedy(sentence)
        check_maps(reference, result)
    for result, sentence in zip(js_translate(page, sentences, 3, 1.2), sentences):
        assert result["tokens"] == reference.beam(sentence, 3, 1.2)[0]
    assert page.errors == []
    page.page.close()


@pytest.mark.parametrize("dtype", _DTYPES)
def test_the_page_opened_from_a_file_translates_the_same(browser, references, dtype):
    "Opened from file:// (no server): the weights load, and greedy and beam-5 tokens equal PyTorch's; no errors."
    page = open_page(browser, HERE.as_uri() + "/", dtype)
    reference, sentences = references[dtype], parity_sentences()[:3]
    for sentence, result in zip(sentences, js_translate(page, sentences, 1, 0.6)):
        assert result["tokens"] == reference.greedy(sentence), sentence
    for sentence, result in zip(sentences[:2], js_translate(page, sentences[:2], 5, 1.2)):
        assert result["tokens"] == reference.beam(sentence, 5, 1.2)[0], sentence
    assert page.errors == []
    page.page.close()


LONG_SENTENCE = "Fünf Leute in Winterjacken und mit Helmen stehen im Schnee mit Schneemobilen im Hintergrund."


@pytest.mark.parametrize("mode", ["http", "file"])
def test_the_demo_translates_in_a_worker_without_holding_the_page(browser, http_root, references, mode):
    """demo.html (the demo of appendix 14) translates in a Web Worker, from a web server and from file://, and the text
    is PyTorch's. In at least one of up to three beam-5 translations, no task on the page's main thread lasts longer
    than 50 ms (a long-task observer) while it translates and draws the maps. Three tries, because on a machine shared with other programs a burst of theirs can stretch a
    single task; work that holds the main thread for long every time (a translation there) fails all three, work that
    comes near 50 ms, or passes it only now and then, may pass."""
    page = Page(browser.new_page(), "int8")
    page.page.goto(f"{http_root if mode == 'http' else HERE.as_uri() + '/'}demo.html")
    page.page.get_by_role("button", name="Load the model").click()
    page.page.wait_for_function("document.querySelectorAll('.tnb-map').length > 0", timeout=60_000)
    page.js("""() => { window.longTasks = [];
        new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks.push(e.duration); })
            .observe({ type: "longtask" }); }""")
    page.page.locator("textarea").fill(LONG_SENTENCE)
    heads, seen = page.js("() => window.transformerNbWeights.config.h"), []
    for _ in range(3):
        page.js("() => { window.longTasks = []; }")
        page.page.get_by_role("button", name="Translate").click()
        page.page.wait_for_function("document.querySelector('.tnb-demo-output').textContent !== '…'", timeout=60_000)
        expect(page.page.locator("table.tnb-map")).to_have_count(heads)    # every map drawn
        status = page.page.locator(".tnb-demo-status").inner_text()
        assert "(in a Web Worker)" in status, status
        page.page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 100)))")
        seen.append(page.js("() => window.longTasks"))                    # the last map drawn, its tasks reported
        if not seen[-1]:
            break
    assert [] in seen, f"in each of three translations a task on the page's main thread took over 50 ms: {seen}"
    tokens = references["int8"].beam(LONG_SENTENCE, 5, 1.2)[0]
    assert page.page.locator(".tnb-demo-output").inner_text() == references["int8"].tokenizer.decode(tokens)
    assert page.errors == []
    page.page.close()


# ---------------------------------------------------------------------------------------------------------------
# (c) A clean console (runs last on each page)
# ---------------------------------------------------------------------------------------------------------------
def test_no_console_errors(page):
    assert page.errors == []
