"""Greedy decoding with and without the key/value cache: tokens per second and their ratio at several output lengths,
both measured in the same run on the same model.

    python bench/decoding.py                          # base-size model (d_model 512, N 6), batch 8
    python bench/decoding.py --d-model 256 --N 3 --lengths 16 64 128 256
"""
import argparse

import torch

from _timing import timed
from transformer_nb.decoding import greedy_decode
from transformer_nb.masks import padding_mask
from transformer_nb.model import make_model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--N", type=int, default=6)
    p.add_argument("--h", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    model = make_model(a.vocab, a.vocab, N=a.N, d_model=a.d_model, d_ff=4 * a.d_model, h=a.h).to(a.device).eval()
    src = torch.randint(3, a.vocab, (a.batch, a.src_len), device=a.device)
    mask = padding_mask(src, 0)
    print(f"torch {torch.__version__} on {a.device}, {torch.get_num_threads()} threads; d_model={a.d_model}, N={a.N}, "
          f"h={a.h}, batch {a.batch}, source length {a.src_len}; median of {a.repeats}")
    print(f"{'tokens':>7} {'uncached tok/s':>15} {'cached tok/s':>13} {'ratio':>7}")
    for n in a.lengths:
        def run(use_cache):
            out = greedy_decode(model, src, mask, max_length=n + 1, start_symbol=1, use_cache=use_cache)  # no end symbol: exactly n tokens
            if a.device == "cuda":
                torch.cuda.synchronize()
            assert out.size(1) == n + 1
        run(True)                                                     # warm-up
        slow, fast = timed(lambda: run(False), a.repeats), timed(lambda: run(True), a.repeats)
        tokens = a.batch * n
        print(f"{n:>7} {tokens / slow:>15.0f} {tokens / fast:>13.0f} {slow / fast:>6.1f}x", flush=True)


if __name__ == "__main__":
    main()
