"""Timings of engine.js in chromium (playwright), printed: weight load time, and milliseconds per generated token
for greedy decoding and beam search (5 / 1.2) on 20 Multi30k test sentences; PyTorch on one thread beside them.

Run (after the parity test has written build/, or after `python export.py CHECKPOINT build`):
    OMP_NUM_THREADS=1 python bench.py            -> also writes results/bench.json
"""
import json
import time

import torch
from playwright.sync_api import sync_playwright

from export import DTYPES, dequantized_model
from reference import HERE, load_model, torch_beam, torch_greedy
from test_parity import CHROMIUM_ARGS, parity_sentences


def browser_timings() -> dict:
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for dtype in DTYPES:                              # a fresh page each: nothing cached between them
            page = browser.new_page()
            page.goto((HERE / "bench.html").as_uri())
            out[dtype] = page.evaluate("([url, s]) => runBench(url, s)", [f"build/weights-{dtype}.js", parity_sentences()])
            page.close()
        browser.close()
    return out


def pytorch_timings() -> dict:
    "The same sentences with PyTorch, one sentence at a time on one thread (int8-dequantized weights)."
    torch.set_num_threads(1)
    model, tokenizer, _ = load_model()
    model, out = dequantized_model(model, "int8"), {}
    for name, run in (("greedy", lambda s: torch_greedy(model, tokenizer, s)),
                      ("beam5", lambda s: torch_beam(model, tokenizer, s, 5, 1.2)[0])):
        run(parity_sentences()[0])                        # warm-up
        start, generated = time.perf_counter(), 0
        for sentence in parity_sentences():
            generated += len(run(sentence)) - 1
        seconds = time.perf_counter() - start
        out[name] = {"msPerToken": 1000 * seconds / generated, "msPerSentence": 1000 * seconds / 20}
    return out


if __name__ == "__main__":
    results = {"model": load_model()[2], "browser": browser_timings(), "pytorch_1_thread": pytorch_timings()}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "bench.json").write_text(json.dumps(results, indent=1))
    for dtype, r in results["browser"].items():
        print(f"[{dtype}] load: script {r['scriptMs']:.0f} ms + load() {r['loadMs']:.0f} ms")
        for name in ("greedy", "beam5"):
            b = r[name]
            print(f"[{dtype}] {name}: {b['msPerToken']:.1f} ms per output token, {b['msPerStep']:.1f} ms per decoder "
                  f"step ({b['generated']} tokens, {b['steps']} steps), + {b['attentionMsPerSentence']:.0f} ms per "
                  f"sentence for the attention maps; {b['msPerSentence']:.0f} ms per sentence in all")
    for name, r in results["pytorch_1_thread"].items():
        print(f"[pytorch] {name}: {r['msPerToken']:.1f} ms per output token, {r['msPerSentence']:.0f} ms per sentence")
