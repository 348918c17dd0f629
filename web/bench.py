"""Timings of engine.js in Chromium (Playwright), printed and never asserted: the time to load the weights, and
milliseconds per generated token for greedy decoding and beam search (5, length penalty 1.2) on the 20 test sentences
of the parity tests; PyTorch on one thread beside them, one sentence at a time. Appendix 14 prints `measure()`.

The first round times int8 and float16 weights with the linear layers in WebAssembly, and int8 with them in
JavaScript, each in a fresh Chromium. Absolute times depend on the machine, so what compares engines is a ratio,
measured in rounds: each round starts a fresh Chromium (int8 weights, WebAssembly), then times PyTorch in this
process, and gives beam 5's cost per token over greedy's and Chromium's greedy over PyTorch's; the median of the
rounds is printed with their range.

    python web/bench.py [rounds]
"""
import statistics
import sys
import time

import pandas as pd
import torch
from playwright.sync_api import sync_playwright

from reference import HERE, load_model, torch_beam, torch_greedy
from test_parity import BUILD, CHROMIUM, CHROMIUM_ARGS, parity_sentences
from transformer_nb.web import _dequantized_model, export_weights


RUNS = (("int8", True), ("float16", True), ("int8", False))   # (storage dtype, linear layers in WebAssembly)


def browser_timings(model, tokenizer, runs=RUNS) -> dict:
    "Per run, in a fresh Chromium each: runBench's load time and per-token timings (bench.js)."
    out = {}
    with sync_playwright() as p:
        for dtype in {dtype for dtype, _ in runs}:
            export_weights(BUILD / f"weights-{dtype}.js", model, tokenizer, dtype)
        for dtype, wasm in runs:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto((HERE / "bench.html").as_uri())
            out[dtype, wasm] = page.evaluate("([url, s, wasm]) => runBench(url, s, wasm)",
                                             [f"build/weights-{dtype}.js", parity_sentences(), wasm])
            browser.close()
            if out[dtype, wasm]["kernel"] != ("WebAssembly" if wasm else "JavaScript"):
                raise RuntimeError(f"Chromium ran the linear layers in {out[dtype, wasm]['kernel']}")
    return out


def pytorch_timings(model, tokenizer) -> dict:
    "The same sentences with PyTorch, one at a time on one thread, on the int8 weights."
    torch.set_num_threads(1)
    model, out = _dequantized_model(model, "int8"), {}
    for name, run in (("greedy", lambda s: torch_greedy(model, tokenizer, s)),
                      ("beam5", lambda s: torch_beam(model, tokenizer, s, 5, 1.2)[0])):
        run(parity_sentences()[0])                                       # warm-up
        start, generated = time.perf_counter(), 0
        for sentence in parity_sentences():
            generated += len(run(sentence)) - 1
        out[name] = {"msPerToken": 1000 * (time.perf_counter() - start) / generated}
    return out


def table(browser: dict, pytorch: dict) -> pd.DataFrame:
    """One row per engine (Chromium: the weights' storage, and where its linear layers ran): the weights' load time
    (ms), ms per generated token (greedy, beam 5), and the pass for the attention maps (ms per sentence)."""
    rows = {}
    for (dtype, wasm), r in browser.items():
        rows[f"Chromium, {dtype}, {r['kernel']}"] = {"load (ms)": r["totalLoadMs"],
                                                    "greedy (ms/token)": r["greedy"]["msPerToken"],
                                                    "beam 5 (ms/token)": r["beam5"]["msPerToken"],
                                                    "maps (ms/sentence)": r["greedy"]["attentionMsPerSentence"]}
    rows["PyTorch, 1 thread"] = {"greedy (ms/token)": pytorch["greedy"]["msPerToken"],
                                 "beam 5 (ms/token)": pytorch["beam5"]["msPerToken"]}
    return pd.DataFrame(rows).T


def measure(rounds: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the first round's timings, both dtypes; the ratios of every round, int8, with their median and range)."""
    model, tokenizer, _ = load_model()
    first, ratios = None, []
    for n in range(rounds):
        browser = browser_timings(model, tokenizer, RUNS if n == 0 else RUNS[:1])
        pytorch = pytorch_timings(model, tokenizer)
        first = first if first is not None else table(browser, pytorch)
        chromium = browser["int8", True]
        ratios.append({"beam 5 / greedy, per token (Chromium)":
                           chromium["beam5"]["msPerToken"] / chromium["greedy"]["msPerToken"],
                       "Chromium / PyTorch, greedy": chromium["greedy"]["msPerToken"] / pytorch["greedy"]["msPerToken"],
                       "Chromium / PyTorch, beam 5": chromium["beam5"]["msPerToken"] / pytorch["beam5"]["msPerToken"],
                       "beam 5 decoder steps per token": chromium["beam5"]["steps"] / chromium["beam5"]["generated"]})
    ratios = pd.DataFrame(ratios, index=[f"round {n + 1}" for n in range(rounds)]).T
    summary = ratios.T.agg(["median", "min", "max"]).T
    return first, pd.concat([ratios, summary], axis=1)


if __name__ == "__main__":
    timings, ratios = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    print(timings.round(1).to_string())
    print()
    print(ratios.round(2).to_string())
