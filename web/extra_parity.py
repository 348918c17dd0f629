"""A wider parity run than the test (printed, not asserted): engine.js against PyTorch on the whole Multi30k
validation set with greedy decoding and on its first 200 sentences with beam search (5 / 1.2), int8 weights; and how
close PyTorch's own greedy decisions come to a tie (the smallest gap between the best and the second-best
log-probability), which is what could make float32 arithmetic in another order pick another token.

Run:  OMP_NUM_THREADS=1 python extra_parity.py      -> results/extra_parity.json
"""
import json

import torch
from playwright.sync_api import sync_playwright

from transformer_nb.web import _dequantized_model
from reference import HERE, load_model, multi30k, torch_beam, torch_greedy, _source, _max_length
from test_parity import CHROMIUM_ARGS, Page, js_translate
from transformer_nb.decoding import _init_cache, _next_log_probs


@torch.no_grad()
def greedy_margins(model, tokenizer, sentence):
    "The gap top-1 minus top-2 log-probability at every greedy step."
    ids, src, mask = _source(tokenizer, sentence)
    length = _max_length(model, len(ids))
    memory, cache, ys, gaps = model.encode(src, mask), _init_cache(model, length), torch.tensor([[tokenizer.bos]]), []
    for _ in range(length - 1):
        top = _next_log_probs(model, memory, mask, ys, cache)[0].topk(2)
        gaps.append(float(top.values[0] - top.values[1]))
        ys = torch.cat([ys, top.indices[:1].view(1, 1)], dim=1)
        if int(top.indices[0]) == tokenizer.eos:
            break
    return gaps


if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tokenizer, description = load_model()
    model = _dequantized_model(model, "int8")
    sentences = [de for de, _ in multi30k("val")]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = Page(browser.new_page(), "int8")
        page.page.goto(f"{HERE.as_uri()}/test.html?weights=build/weights-int8.js")
        page.js("() => window.ready")
        js_greedy = [r["tokens"] for r in js_translate(page, sentences, 1, 0.6)]
        js_beam = [r["tokens"] for r in js_translate(page, sentences[:200], 5, 1.2)]
        assert page.errors == [], page.errors
        browser.close()
    greedy_diff = [s for s, t in zip(sentences, js_greedy) if t != torch_greedy(model, tokenizer, s)]
    beam_diff = [s for s, t in zip(sentences, js_beam) if t != torch_beam(model, tokenizer, s, 5, 1.2)[0]]
    gaps = [g for s in sentences for g in greedy_margins(model, tokenizer, s)]
    results = {"model": description, "greedy_sentences": len(sentences), "greedy_differ": len(greedy_diff),
               "beam5_sentences": 200, "beam5_differ": len(beam_diff), "differing": greedy_diff + beam_diff,
               "greedy_steps": len(gaps), "smallest_greedy_gap": min(gaps),
               "greedy_steps_with_gap_below_1e-4": sum(g < 1e-4 for g in gaps),
               "greedy_steps_with_gap_below_1e-3": sum(g < 1e-3 for g in gaps)}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "extra_parity.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    print(json.dumps(results, indent=1, ensure_ascii=False))
