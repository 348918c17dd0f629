"""The pieces of one decoding step that appendix 16 changed, timed on the shapes of a beam of 5 over 64 sentences
(320 rows, d_model 256, h 4, 31 source positions, 4,000 words), each against what it replaced.

Every comparison alternates its variants within a process; the measurement runs in several fresh processes, one after
the other (each in a process of its own: another library's thread pool in the same process, CTranslate2's for one, slows
PyTorch's small operations down), and prints the median over the processes of each variant's time, and of the ratio.

    python bench/step_parts.py                 # 3 processes, 2 threads
    python bench/step_parts.py --threads 1
"""
import argparse
import multiprocessing as mp
import statistics
import sys

from _timing import cpu, timed


def cases(torch, F):
    "Name -> (variant -> function), the first variant the one the package used before."
    from transformer_nb.attention import Linear, _few_queries
    rows, h, d_k, keys, sentences = 320, 4, 64, 31, 64
    q, kv = torch.randn(rows, h, 1, d_k), torch.randn(2, rows, h, keys, d_k)
    x, proj = torch.randn(rows, 256), Linear(256, 4000)                 # the output layer's shape
    # cross-attention with the source's padding mask, additive (0 or -inf), as chapter 06's cache holds it
    lengths = torch.randint(10, keys + 1, (sentences, 1, 1, 1))
    mask = torch.zeros(sentences, 1, 1, keys).masked_fill(torch.arange(keys) >= lengths, float("-inf"))
    row_mask, per_sentence = mask.repeat_interleave(5, 0), kv[:, ::5].contiguous()   # (320, ...), (2, 64, ...)
    grouped = q.view(sentences, 5, h, d_k).transpose(1, 2)             # a sentence's 5 rows as 5 queries
    sdpa = F.scaled_dot_product_attention
    return {
        "self-attention, one query per row, 31 keys": {
            "fused kernel": lambda: sdpa(q, kv[0], kv[1]),
            "three operations": lambda: _few_queries(q, kv[0], kv[1])},
        "output layer, 320 x 256 @ 256 x 4000": {
            "F.linear": lambda: F.linear(x, proj.weight, proj.bias),
            "Linear (oneDNN)": lambda: proj(x)},
        "cross-attention of 5 hypotheses, source mask": {
            "fused kernel, a copy per row": lambda: sdpa(q, kv[0], kv[1], attn_mask=row_mask),
            "fused kernel, one copy per sentence": lambda: sdpa(grouped, per_sentence[0], per_sentence[1],
                                                                attn_mask=mask),
            "three operations, a copy per row": lambda: _few_queries(q, kv[0], kv[1], row_mask),
            "three operations, one copy per sentence": lambda: _few_queries(grouped, per_sentence[0],
                                                                            per_sentence[1], mask)},
    }


def measure(threads: int, repeats: int, rounds: int, results):
    "In a fresh process: each variant's median time in microseconds, the variants of a case taking turns."
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out = {}
    with torch.no_grad():
        for name, variants in cases(torch, F).items():
            times = {v: [] for v in variants}
            for fn in variants.values():
                fn()                                                   # a first, untimed call
            for _ in range(rounds):
                for v, fn in variants.items():
                    times[v].append(timed(fn, repeats) * 1e6)
            out[name] = {v: statistics.median(t) for v, t in times.items()}
    results.put(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5, help="turns of each case's variants within a process")
    p.add_argument("--repeats", type=int, default=50, help="calls per timing (their median is taken)")
    a = p.parse_args()
    spawn, runs = mp.get_context("spawn"), []
    for _ in range(a.processes):                                      # one at a time
        results = spawn.Queue()
        worker = spawn.Process(target=measure, args=(a.threads, a.repeats, a.rounds, results))
        worker.start()
        runs.append(results.get())
        worker.join()
    import torch
    print(f"{cpu()}; torch {torch.__version__}, {a.threads} thread"
          f"{'s' if a.threads > 1 else ''}; microseconds, the median of {a.processes} processes; ratio: time over the "
          f"first variant's")
    for name, variants in runs[0].items():
        print(name)
        first = next(iter(variants))
        for v in variants:
            us = statistics.median(r[name][v] for r in runs)
            ratio = statistics.median(r[name][v] / r[name][first] for r in runs)
            print(f"  {v:<42} {us:>8.0f} us  {ratio:>5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
