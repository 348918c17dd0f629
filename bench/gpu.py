"""One GPU, measured in one run: the base-size training step against nn.Transformer (eager and compiled, bfloat16 and
TF32) as milliseconds, tokens per second and MFU; chapter 08's epoch; greedy and beam decoding at batch 1, 8 and 64;
host-device syncs.

    python bench/gpu.py                                   # on a CUDA machine; prints one line and exits 0 without one
    python bench/gpu.py --data ../shared/data/multi30k    # and chapter 08's first epoch on Multi30k
    python bench/gpu.py --no-compile --peak 989e12        # skip torch.compile; the card's dense bf16 peak in FLOP/s
    python bench/gpu.py --device cpu --tiny --no-compile  # the whole script at toy sizes on a CPU (a test runs this)
    python bench/gpu.py --parts training --precisions bf16 # only the bfloat16 training step (compiling takes minutes)

MFU is model FLOPs per second over the card's dense bf16 peak. The FLOPs are counted exactly from the shapes of the
matrix products a step computes on its padded batch (3x the forward products for forward + backward): projections,
attention scores and weighted sums (the decoder's causal self-attention counted for its lower triangle only), the
feed-forward layers, and the output projection at the labelled positions only, the useful work both models share.
Each timing is the median of several steps after warm-up, alternating between the models, synchronised at the end.
"""
import argparse
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])                   # bench/ on the path, as when run from anywhere
from train_step import TorchTransformerModel, batches, ours_step, torch_step  # noqa: E402
from transformer_nb.decoding import beam_search, greedy_decode, _init_cache, _next_log_probs  # noqa: E402
from transformer_nb.loss import LabelSmoothing, SimpleLossCompute  # noqa: E402
from transformer_nb.masks import padding_mask  # noqa: E402
from transformer_nb.model import make_model  # noqa: E402
from transformer_nb.precision import autocast  # noqa: E402

PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12}   # dense bf16 FLOP/s (SXM parts)


def step_flops(batch, d_model: int, N: int, d_ff: int, vocab: int) -> float:
    "FLOPs of one training step's matrix products on `batch` (padded shapes), forward + backward = 3 x forward."
    B, Ls, Lt, d = batch.src.size(0), batch.src.size(1), batch.tgt.size(1), d_model
    mm = lambda m, k, n: 2.0 * m * k * n                               # (m, k) @ (k, n)
    encoder = (mm(B * Ls, d, 3 * d) + 2 * mm(B * Ls, d, Ls) + mm(B * Ls, d, d)  # Q, K, V; scores and sum; W^O
               + mm(B * Ls, d, d_ff) + mm(B * Ls, d_ff, d))
    causal = Lt * (Lt + 1) / 2                                         # query-key pairs of the lower triangle
    decoder = (mm(B * Lt, d, 3 * d) + 2 * 2.0 * B * causal * d + mm(B * Lt, d, d)       # self-attention
               + mm(B * Lt, d, d) + mm(B * Ls, d, 2 * d) + 2 * mm(B * Lt, d, Ls) + mm(B * Lt, d, d)  # cross-attention
               + mm(B * Lt, d, d_ff) + mm(B * Lt, d_ff, d))
    return 3 * (N * (encoder + decoder) + mm(batch.ntokens, d, vocab))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, device, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def training_setups(a, device, compile_: bool):
    "This package's model and nn.Transformer at the same sizes, each with its loss, optimizer and step function."
    torch.manual_seed(0)
    ours = make_model(a.vocab, a.vocab, N=a.N, d_model=a.d_model, d_ff=a.d_ff, h=a.h, padding_idx=0).to(device)
    ref = TorchTransformerModel(make_model(a.vocab, a.vocab, N=1, d_model=a.d_model, d_ff=a.d_ff, h=a.h),
                                a.N, a.d_model, a.d_ff, a.h, 0.1, False, a.vocab).to(device)
    setups = {"transformer_nb": (ours, ours_step, SimpleLossCompute(ours.generator, LabelSmoothing(a.vocab, 0, 0.1))),
              "nn.Transformer": (ref, torch_step, nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1,
                                                                      reduction="sum"))}
    if compile_:
        setups |= {f"{name} compiled": (torch.compile(m), step, fn) for name, (m, step, fn) in list(setups.items())}
    return {name: (m, step, fn, torch.optim.Adam(m.parameters(), lr=1e-4)) for name, (m, step, fn) in setups.items()}


def training(a, device, compile_: bool):
    data = [b.to(device) for b in batches(a.steps, a.batch, a.vocab, a.len, torch.Generator().manual_seed(0))]
    flops = statistics.mean(step_flops(b, a.d_model, a.N, a.d_ff, a.vocab) for b in data)
    tokens = statistics.mean(b.ntokens for b in data)
    print(f"\n## training step: d_model {a.d_model}, N {a.N}, h {a.h}, d_ff {a.d_ff}, vocab {a.vocab:,}, "
          f"{tokens:,.0f} target tokens a batch, {flops / 1e12:.2f} TFLOP a step")
    for precision in a.precisions:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
        setups = training_setups(a, device, compile_)
        cast = "bf16" if precision == "bf16" else "fp32"

        def one(name, b):
            model, step, fn, optimizer = setups[name]
            with autocast(cast, device):
                loss = step(model, fn, b)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for name in setups:                                            # warm-up (and compilation)
            for b in data[:2]:
                one(name, b)
        ms = {name: [] for name in setups}
        for _ in range(a.rounds):                                      # alternate: drift hits every model alike
            for name in setups:
                ms[name].append(median_ms(lambda: [one(name, b) for b in data], device, 1) / len(data))
        base = statistics.median(ms["nn.Transformer"])
        for name, values in ms.items():
            t = statistics.median(values)
            mfu = f"{flops / (t / 1000) / a.peak:6.1%}" if a.peak else "   n/a"
            print(f"{precision:5s} {name:26s} {t:8.2f} ms  {tokens / t * 1000:10,.0f} tokens/s  MFU {mfu}  "
                  f"{base / t:5.2f}x nn.Transformer eager")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def decoding(a, device):
    torch.manual_seed(0)
    model = make_model(a.vocab, a.vocab, N=a.N, d_model=a.d_model, d_ff=a.d_ff, h=a.h, padding_idx=0).to(device).eval()
    with torch.no_grad():
        model.generator.proj.bias[2] = -1e4                            # the end symbol never wins: full-length outputs
    n = a.decode_len
    print(f"\n## decoding (cached, float32): {n} generated tokens, source length {a.len}")
    for batch in sorted({1, 8, a.decode_batch}):
        src = torch.randint(3, a.vocab, (batch, a.len), device=device)
        mask = padding_mask(src, 0)
        for name, fn in (("greedy", lambda: greedy_decode(model, src, mask, n + 1, 1, end_symbol=2, padding_idx=0)),
                         ("beam 4", lambda: beam_search(model, src, mask, n + 1, 1, 2, beam_size=4, padding_idx=0))):
            fn()                                                       # warm-up
            t = median_ms(fn, device, a.rounds)
            print(f"{name:7s} batch {batch:3d}: {batch * n / t * 1000:10,.0f} tokens/s ({t / n:6.2f} ms a step)")


def syncs(a, device):
    "Host-device synchronisations of a training step, a cached decoding step and a whole greedy decode."
    print("\n## host-device synchronisations (torch.cuda.set_sync_debug_mode)")
    if device.type != "cuda":
        print("not counted: no CUDA device")
        return
    torch.manual_seed(0)
    model = make_model(a.vocab, a.vocab, N=a.N, d_model=a.d_model, d_ff=a.d_ff, h=a.h, padding_idx=0).to(device)
    loss_compute = SimpleLossCompute(model.generator, LabelSmoothing(a.vocab, 0, 0.1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    b = batches(1, a.batch, a.vocab, a.len, torch.Generator().manual_seed(0))[0].to(device)
    src, mask = b.src[:8], b.src_mask[:8]

    def train_step():
        ours_step(model, loss_compute, b).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def decode_step():
        with torch.no_grad():
            memory, cache = model.encode(src, mask), _init_cache(model, 4096)   # room for every timed step
            ys = torch.ones(8, 1, dtype=torch.long, device=device)
            sync(device)
            return lambda: _next_log_probs(model, memory, mask, ys, cache)

    train_step()
    step = decode_step()
    model.eval()
    for name, fn in (("training step (forward, loss, backward, Adam)", train_step),
                     ("one cached decoding step", step),
                     ("greedy decode of 20 tokens, batch 8",
                      lambda: greedy_decode(model, src, mask, 21, 1, end_symbol=2, padding_idx=0))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                with torch.no_grad() if "decod" in name else torch.enable_grad():
                    fn()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        found = [w for w in caught if "synchroniz" in str(w.message)]
        print(f"{name}: {len(found)}")


def translation_epoch(a, device):
    "Chapter 08's recipe, its first epoch, as `transformer-nb translate` trains it."
    print("\n## chapter 08's recipe, epoch 1")
    if a.data is None:
        print("not measured: give --data DIR (the Multi30k files)")
        return
    from transformer_nb.data import load_multi30k
    from transformer_nb.translation_task import TranslationRecipe, train_translation
    train_pairs, val_pairs = load_multi30k("train", a.data), load_multi30k("val", a.data)
    start = time.perf_counter()
    _, _, history = train_translation(TranslationRecipe(epochs=1, device=str(device)), train_pairs, val_pairs,
                                      progress=False)
    print(f"{time.perf_counter() - start:.1f} s from the start to the end of epoch 1 (tokenizer, batches, training, "
          f"validation); val loss {history[-1]['val_loss']:.3f}")


PARTS = {"training": lambda a, device: training(a, device, not a.no_compile), "decoding": decoding, "syncs": syncs,
         "epoch": translation_epoch}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="toy sizes, to check the script itself")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile'd models")
    p.add_argument("--peak", type=float, default=None, help="the card's dense bf16 FLOP/s (default: by its name)")
    p.add_argument("--data", default=None, help="Multi30k folder, for chapter 08's epoch")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS), help="what to measure")
    p.add_argument("--precisions", nargs="+", default=["bf16", "tf32"], choices=["bf16", "tf32"],
                   help="the training step's precisions")
    a = p.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA device here, nothing measured")
        return
    sizes = dict(d_model=32, N=1, h=2, d_ff=64, vocab=50, batch=4, len=6, steps=2, decode_len=4, decode_batch=4)
    if not a.tiny:                                                     # the paper's base model, ~25,000 target tokens
        sizes = dict(d_model=512, N=6, h=8, d_ff=2048, vocab=37000, batch=1000, len=24, steps=4, decode_len=32,
                     decode_batch=64)
    for k, v in sizes.items():
        setattr(a, k, v)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    a.peak = a.peak or next((v for k, v in PEAKS.items() if k in name), None)
    print(f"torch {torch.__version__} on {name}; dense bf16 peak "
          f"{f'{a.peak / 1e12:.0f} TFLOP/s' if a.peak else 'unknown (give --peak): no MFU'}")
    for part in a.parts:
        PARTS[part](a, device)


if __name__ == "__main__":
    main()
