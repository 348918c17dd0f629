"""Copy task: time to 100% held-out exact copies for the default recipe, against the Annotated Transformer's recipe
measured in the same run.

The reference is the Annotated Transformer's `example_simple_model`: make_model(V, V, N=2) at the base width
(d_model 512, d_ff 2048, h 8, dropout 0.1), Adam(lr 0.5 x Noam(d_model 512, factor 1, warmup 400)), batches of 80,
20 epochs x 20 batches = 400 steps. It runs here on the same copy-task data, for `--ref-steps` timed steps; its full
400-step time is estimated from the time per step (add `--ref-full` to run all 400 steps and evaluate it).

    python bench/copy_task.py                 # 3 runs of the default recipe, 40 reference steps
    python bench/copy_task.py --runs 5 --ref-full
    python bench/copy_task.py --seeds 5       # also seeds 0-4 once each: how much the seed moves steps and seconds

The runs of one seed differ only by timing noise; the steps to 100% depend on the seed (chapter 07: from about 350 to
500 steps), and so does the time.
"""
import argparse
import statistics
import time

import torch
from torch.optim.lr_scheduler import LambdaLR

from transformer_nb.copy_task import CopyConfig, train_copy, held_out_set, copy_batches, copy_accuracy, PAD
from transformer_nb.model import make_model
from transformer_nb.epoch import TrainState, run_epoch
from transformer_nb.loss import LabelSmoothing, SimpleLossCompute
from transformer_nb.schedule import rate


def reference_recipe(steps: int, held, seed: int = 0):
    "The Annotated Transformer's copy-task recipe for `steps` optimizer steps; returns (seconds, accuracy)."
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = make_model(11, 11, N=2, padding_idx=PAD)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    scheduler = LambdaLR(optimizer, lambda step: rate(step, 512, factor=1.0, warmup=400))
    criterion = LabelSmoothing(11, padding_idx=PAD, smoothing=0.0)
    state, start = TrainState(), time.perf_counter()
    while state.accum_step < steps:
        batches = copy_batches(min(20, steps - state.accum_step), 80, generator=gen)
        run_epoch(batches, model, SimpleLossCompute(model.generator, criterion), optimizer, scheduler, train_state=state, progress=False)
    seconds = time.perf_counter() - start
    return seconds, copy_accuracy(model, held)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs of the default recipe (median reported)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (the same seed: timing noise only)")
    p.add_argument("--ref-steps", type=int, default=40, help="reference steps to time")
    p.add_argument("--ref-full", action="store_true", help="run the reference's full 400 steps")
    p.add_argument("--seeds", type=int, default=0, help="also train seeds 0..SEEDS-1 once each (median reported)")
    a = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    held = held_out_set()
    times, steps = [], []
    for i in range(a.runs):
        start = time.perf_counter()
        _, history = train_copy(CopyConfig(seed=a.seed), held_out=held, progress=False)
        times.append(time.perf_counter() - start)
        steps.append(history[-1]["step"])
        print(f"default recipe run {i + 1}: {history[-1]['accuracy']:.1%} after {steps[-1]} steps in {times[-1]:.1f} s", flush=True)
        assert history[-1]["accuracy"] == 1.0, "did not reach 100%"
    ours = statistics.median(times)
    if a.seeds:
        by_seed = []
        for seed in range(a.seeds):
            start = time.perf_counter()
            _, history = train_copy(CopyConfig(seed=seed), held_out=held, progress=False)
            by_seed.append((seed, history[-1]["step"], time.perf_counter() - start, history[-1]["accuracy"]))
        print("seeds: " + ", ".join(f"{s}: {n} steps {t:.1f} s{'' if acc == 1 else f' ({acc:.1%})'}"
                                    for s, n, t, acc in by_seed))
        print(f"seeds 0-{a.seeds - 1}: median {statistics.median(t for _, _, t, _ in by_seed):.1f} s, "
              f"{statistics.median(n for _, n, _, _ in by_seed):.0f} steps")
    ref_steps = 400 if a.ref_full else a.ref_steps
    ref_seconds, ref_acc = reference_recipe(ref_steps, held)
    ref_full = ref_seconds / ref_steps * 400
    print(f"reference recipe: {ref_steps} steps in {ref_seconds:.1f} s ({ref_seconds / ref_steps * 1000:.0f} ms/step), "
          f"held-out accuracy {ref_acc:.1%}; full 400 steps {'took' if a.ref_full else 'estimated at'} {ref_full:.0f} s")
    print(f"default recipe: median {ours:.1f} s to 100% (runs: {', '.join(f'{t:.1f}' for t in times)})")
    print(f"ratio: reference full recipe / default recipe = {ref_full / ours:.1f}x")


if __name__ == "__main__":
    main()
