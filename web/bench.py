"""Timings of engine.js in Chromium (Playwright), printed and never asserted: the time to load the weights, and
milliseconds per generated token for greedy decoding and beam search (5, length penalty 1.2) on the 20 test sentences
of the parity tests; PyTorch on one thread beside them, one sentence at a time. Appendix 14 prints `measure()`.

    python web/bench.py
"""
import time

import pandas as pd
import torch
from playwright.sync_api import sync_playwright

from reference import HERE, load_model, torch_beam, torch_greedy
from test_parity import BUILD, CHROMIUM, CHROMIUM_ARGS, parity_sentences
from transformer_nb.web import DTYPES, dequantized_model, export_weights


def browser_timings(model, tokenizer) -> dict:
    "Per storage dtype, in a fresh page each: runBench's load time and per-token timings (bench.js)."
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for dtype in DTYPES:
            export_weights(BUILD / f"weights-{dtype}.js", model, tokenizer, dtype)
            page = browser.new_page()
            page.goto((HERE / "bench.html").as_uri())
            out[dtype] = page.evaluate("([url, s]) => runBench(url, s)", [f"build/weights-{dtype}.js", parity_sentences()])
            page.close()
        browser.close()
    return out


def pytorch_timings(model, tokenizer) -> dict:
    "The same sentences with PyTorch, one at a time on one thread, on the int8 weights."
    torch.set_num_threads(1)
    model, out = dequantized_model(model, "int8"), {}
    for name, run in (("greedy", lambda s: torch_greedy(model, tokenizer, s)),
                      ("beam5", lambda s: torch_beam(model, tokenizer, s, 5, 1.2)[0])):
        run(parity_sentences()[0])                                       # warm-up
        start, generated = time.perf_counter(), 0
        for sentence in parity_sentences():
            generated += len(run(sentence)) - 1
        out[name] = {"msPerToken": 1000 * (time.perf_counter() - start) / generated}
    return out


def measure() -> pd.DataFrame:
    "One row per engine: weights load time (ms) and ms per generated token, greedy and beam 5."
    model, tokenizer, _ = load_model()
    rows = {}
    for dtype, r in browser_timings(model, tokenizer).items():
        rows[f"Chromium, {dtype} weights"] = {"load the weights (ms)": r["totalLoadMs"],
                                              "greedy (ms per token)": r["greedy"]["msPerToken"],
                                              "beam 5 (ms per token)": r["beam5"]["msPerToken"],
                                              "attention maps (ms per sentence)": r["greedy"]["attentionMsPerSentence"]}
    r = pytorch_timings(model, tokenizer)
    rows["PyTorch, 1 thread"] = {"greedy (ms per token)": r["greedy"]["msPerToken"],
                                 "beam 5 (ms per token)": r["beam5"]["msPerToken"]}
    return pd.DataFrame(rows).T


if __name__ == "__main__":
    print(measure().round(1).to_string())
