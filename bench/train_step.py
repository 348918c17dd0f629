"""Training-step speed: this project's make_model and loss against what a PyTorch user would write, torch.nn.Transformer
with a linear output layer and nn.CrossEntropyLoss(label_smoothing=0.1) (same embeddings and positional encoding), at
equal configuration and precision, measured alternately in one run.

    python bench/train_step.py                     # float32; d_model 256, h 4, 3+3 layers, d_ff 1024, 64 pairs of ~15 tokens
    python bench/train_step.py --precision bf16    # both under autocast to bfloat16
    python bench/train_step.py --rounds 10 --pre-norm
    python bench/train_step.py --precision bf16 --paper-dropout   # ours with dropout only where the paper has it
    python bench/train_step.py --every-position    # and ours with the generator at every position, padding included
    python bench/train_step.py --processes 5       # five fresh processes; the median ratio and its spread

Timings of one process agree with each other within a few per cent, but fresh processes differ by more (memory layout,
thread placement): by default the measurement runs in 3 fresh processes, one after the other, and the summary line
gives the median of their ratios and the lowest and highest.
"""
import argparse
import copy
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from transformer_nb.masks import subsequent_mask, keep_to_ignore
from transformer_nb.model import make_model
from transformer_nb.batch import Batch
from transformer_nb.loss import LabelSmoothing, SimpleLossCompute
from transformer_nb.precision import autocast


class TorchTransformerModel(nn.Module):
    "nn.Transformer between this project's embeddings (with positions) and a linear layer giving logits."
    def __init__(self, ours, N, d_model, d_ff, h, dropout, pre_norm, vocab):
        super().__init__()
        self.src_embed, self.tgt_embed = ours.src_embed, ours.tgt_embed
        self.proj = nn.Linear(d_model, vocab)
        self.transformer = nn.Transformer(d_model, h, N, N, d_ff, dropout, batch_first=True, norm_first=pre_norm)

    def forward(self, src, tgt, src_mask, tgt_mask):
        src_pad = ~src_mask[:, 0]                                      # keep (b, 1, Ls) -> ignore (b, Ls)
        causal = keep_to_ignore(subsequent_mask(tgt.size(1), device=tgt.device)[0])  # (Lt, Lt), True = may not attend
        tgt_pad = tgt == 0                                             # (b, Lt): the pad keys (pad id 0 here)
        out = self.transformer(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=causal, src_key_padding_mask=src_pad,
                               tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return self.proj(out)                                          # (b, Lt, vocab) logits


def ours_step(model, loss_compute, b):
    "This project's way: the model's output through its generator and the closed-form LabelSmoothing."
    _, loss = loss_compute(model(b.src, b.tgt, b.src_mask, b.tgt_mask), b.tgt_y, b.ntokens, b.rows)
    return loss


def every_position_step(model, loss_compute, b):
    "This project's model and loss, but the generator applied at every position, as before padding was left out."
    x = model(b.src, b.tgt, b.src_mask, b.tgt_mask)
    log_probs = loss_compute.generator(x.reshape(-1, x.size(-1)))     # (batch*len, vocab), padding included
    return loss_compute.criterion(log_probs, b.tgt_y.reshape(-1)) / b.ntokens


def torch_step(model, loss_fn, b):
    "The usual PyTorch way: logits into nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=pad), summed per token."
    logits = model(b.src, b.tgt, b.src_mask, b.tgt_mask)
    return loss_fn(logits.reshape(-1, logits.size(-1)), b.tgt_y.reshape(-1)) / b.ntokens


def batches(n, batch, vocab, mean_len, gen):
    out = []
    for _ in range(n):
        lengths = (torch.randn(batch, generator=gen) * 3 + mean_len).round().clamp(3, 2 * mean_len).long()
        width = int(lengths.max()) + 2
        def side():
            seq = torch.randint(3, vocab, (batch, width), generator=gen)
            seq[:, 0] = 1
            pos = torch.arange(width)
            seq[pos > lengths.unsqueeze(1)] = 0
            seq[torch.arange(batch), lengths] = 2
            return seq
        out.append(Batch(side(), side(), padding_idx=0))
    return out


def step_time(model, optimizer, step, loss_fn, data, precision):
    start = time.perf_counter()
    for b in data:
        with autocast(precision, "cpu"):                               # fp32: a no-op; bf16: torch.autocast on the CPU
            loss = step(model, loss_fn, b)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) / len(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--h", type=int, default=4)
    p.add_argument("--N", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--len", type=int, default=15, help="mean sentence length")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--pre-norm", action="store_true")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--paper-dropout", action="store_true", help="ours without dropout on attention weights and inside "
                   "the feed-forward layer, as in the paper (nn.Transformer keeps both: not an equal comparison)")
    p.add_argument("--every-position", action="store_true", help="add this project's model with the generator applied at "
                   "every position (padding included), to measure what leaving padding out saves")
    p.add_argument("--steps", type=int, default=5, help="steps per measurement")
    p.add_argument("--rounds", type=int, default=5, help="alternating measurements of each model")
    p.add_argument("--processes", type=int, default=3, help="fresh processes to run the measurement in, one at a time")
    a = p.parse_args()
    if a.processes > 1:
        return several_processes(a.processes)
    torch.manual_seed(0)
    extra = dict(attn_dropout=0.0, ff_dropout=0.0) if a.paper_dropout else {}
    ours = make_model(a.vocab, a.vocab, N=a.N, d_model=a.d_model, d_ff=a.d_ff, h=a.h, dropout=a.dropout, pre_norm=a.pre_norm,
                      **extra)
    ref = TorchTransformerModel(make_model(a.vocab, a.vocab, N=1, d_model=a.d_model, d_ff=a.d_ff, h=a.h),
                                a.N, a.d_model, a.d_ff, a.h, a.dropout, a.pre_norm, a.vocab)
    n_ours = sum(p.numel() for p in ours.parameters())
    n_ref = sum(p.numel() for p in ref.parameters())
    setups = {"transformer_nb": (ours, torch.optim.Adam(ours.parameters(), lr=1e-4), ours_step,
                                 SimpleLossCompute(ours.generator, LabelSmoothing(a.vocab, padding_idx=0, smoothing=0.1))),
              "nn.Transformer": (ref, torch.optim.Adam(ref.parameters(), lr=1e-4), torch_step,
                                 nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1, reduction="sum"))}
    if a.every_position:
        every = copy.deepcopy(ours)
        every_loss = SimpleLossCompute(every.generator, LabelSmoothing(a.vocab, padding_idx=0, smoothing=0.1))
        setups["every position"] = (every, torch.optim.Adam(every.parameters(), lr=1e-4), every_position_step, every_loss)
    data = batches(a.steps, a.batch, a.vocab, a.len, torch.Generator().manual_seed(0))
    tokens = statistics.mean(b.ntokens for b in data)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; d_model={a.d_model}, h={a.h}, N={a.N}+{a.N}, "
          f"d_ff={a.d_ff}, {'pre' if a.pre_norm else 'post'}-norm, {a.precision}{', paper dropout' if a.paper_dropout else ''}, batch {a.batch} pairs, {tokens:.0f} target tokens/batch; "
          f"parameters {n_ours:,} vs {n_ref:,}")
    for m, o, step, fn in setups.values():
        m.train(); step_time(m, o, step, fn, data[:2], a.precision)    # warm-up
    results = {name: [] for name in setups}
    for _ in range(a.rounds):
        for name, (m, o, step, fn) in setups.items():                  # alternate, so drift hits both alike
            results[name].append(tokens / step_time(m, o, step, fn, data, a.precision))
    med = {name: statistics.median(v) for name, v in results.items()}
    for name, v in results.items():
        print(f"{name:15s} median {med[name]:8.0f} tokens/s   (rounds: {', '.join(f'{x:.0f}' for x in v)})")
    print(f"ratio transformer_nb / nn.Transformer ({a.precision}): {med['transformer_nb'] / med['nn.Transformer']:.2f}x",
          flush=True)
    if a.every_position:
        print(f"ratio transformer_nb / every position ({a.precision}): {med['transformer_nb'] / med['every position']:.2f}x"
              f"  (positions per batch {statistics.mean(b.tgt_y.numel() for b in data):.0f}, labels {tokens:.0f})")


def several_processes(n: int):
    "Run this script with the same arguments in `n` fresh processes, one after the other; summarise their ratios."
    args = [x for x in sys.argv[1:]]
    if "--processes" in args:
        i = args.index("--processes")
        del args[i:i + 2]
    ratios = {}
    for i in range(n):
        print(f"--- process {i + 1} of {n}", flush=True)
        out = subprocess.run([sys.executable, __file__, *args, "--processes", "1"], capture_output=True, text=True,
                             check=True).stdout
        print(out, end="", flush=True)
        for line in out.splitlines():
            if line.startswith("ratio "):
                name = line.split(":")[0]
                ratios.setdefault(name, []).append(float(line.split(":")[1].split("x")[0]))
    for name, v in ratios.items():
        print(f"{name}: median {statistics.median(v):.2f}x over {n} processes (lowest {min(v):.2f}x, "
              f"highest {max(v):.2f}x; each: {', '.join(f'{x:.2f}' for x in v)})")


if __name__ == "__main__":
    main()
