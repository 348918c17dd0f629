"""Explicit attention (chapter 02's `attention`, which materialises the weights) against the fused path
(`sdpa_attention`, PyTorch's scaled_dot_product_attention), forward and forward+backward, at several lengths,
measured alternately in one run.

    python bench/attention.py                      # batch 8, h 8, d_k 64, causal mask
    python bench/attention.py --lengths 64 256 1024 --no-mask
"""
import argparse
import statistics

import torch

from _timing import timed
from transformer_nb.attention import attention, sdpa_attention
from transformer_nb.masks import subsequent_mask


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--h", type=int, default=8)
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    p.add_argument("--no-mask", action="store_true", help="no mask (default: causal)")
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {a.batch}, h {a.h}, d_k {a.d_k}, "
          f"{'no mask' if a.no_mask else 'causal mask'}; median of {a.repeats} (ms)")
    print(f"{'length':>7} {'explicit fwd':>13} {'fused fwd':>10} {'ratio':>6} {'explicit f+b':>13} {'fused f+b':>10} {'ratio':>6}")
    for n in a.lengths:
        q, k, v = (torch.randn(a.batch, a.h, n, a.d_k, requires_grad=True) for _ in range(3))
        mask = None if a.no_mask else subsequent_mask(n).unsqueeze(1)    # (1, 1, n, n)
        explicit = lambda: attention(q, k, v, mask)[0]
        fused = lambda: sdpa_attention(q, k, v, mask)
        torch.testing.assert_close(explicit(), fused(), rtol=1e-4, atol=1e-5)
        def fwd(f):
            with torch.no_grad():
                f()
        def fwd_bwd(f):
            f().sum().backward()
        res = {}
        for name, f in (("explicit", explicit), ("fused", fused)):
            fwd(f); fwd_bwd(f)                                         # warm-up
        for kind, run in (("fwd", fwd), ("fb", fwd_bwd)):
            e, fu = [], []
            for _ in range(a.repeats):                                 # alternate
                e.append(timed(lambda: run(explicit), 1)); fu.append(timed(lambda: run(fused), 1))
            res[kind] = (statistics.median(e) * 1e3, statistics.median(fu) * 1e3)
        (ef, ff), (eb, fb) = res["fwd"], res["fb"]
        print(f"{n:>7} {ef:>13.2f} {ff:>10.2f} {ef / ff:>5.1f}x {eb:>13.2f} {fb:>10.2f} {eb / fb:>5.1f}x", flush=True)


if __name__ == "__main__":
    main()
