"""Copy task: time to 100% held-out exact copies for the default recipe, against the Annotated Transformer's recipe
measured in the same run.

The reference is the Annotated Transformer's `example_simple_model`: make_model(V, V, N=2), pre-norm as its layers
are, at the base width (d_model 512, d_ff 2048, h 8, dropout 0.1), Adam(lr 0.5 x Noam(d_model 512, factor 1,
warmup 400)), batches of 80, 20 epochs x 20 batches = 400 steps. It runs here on the same copy-task data, for `--ref-steps` timed steps; its full
400-step time is estimated from the time per step (add `--ref-full` to run all 400 steps and evaluate it).

    python bench/copy_task.py                 # 3 runs of the default recipe, 40 reference steps
    python bench/copy_task.py --runs 5 --ref-full
    python bench/copy_task.py --seeds 5       # also seeds 0-4 once each: how much the seed moves steps and seconds
    python bench/copy_task.py --runs 0 --seeds 25 --against h=4,batch_size=64   # the default recipe against another,
                                              # alternately on seeds 0-24 (chapter 07's comparison)

The runs of one seed differ only by timing noise; the steps to 100% depend on the seed (chapter 07: from 200 to 550
steps over seeds 0-24), and so does the time.
"""
import argparse
import dataclasses
import statistics
import time

import torch
from torch.optim.lr_scheduler import LambdaLR

from transformer_nb.copy_task import CopyRecipe, train_copy, held_out_set, copy_batches, copy_accuracy, PAD
from transformer_nb.model import make_model
from transformer_nb.epoch import TrainState, run_epoch
from transformer_nb.loss import LabelSmoothing, SimpleLossCompute
from transformer_nb.schedule import rate


def reference_recipe(steps: int, held, seed: int = 0):
    "The Annotated Transformer's copy-task recipe for `steps` optimizer steps; returns (seconds, accuracy)."
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = make_model(11, 11, N=2, pre_norm=True, padding_idx=PAD)           # its layers: pre-norm, a final norm
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    scheduler = LambdaLR(optimizer, lambda step: rate(step, 512, factor=1.0, warmup=400))
    criterion = LabelSmoothing(11, padding_idx=PAD, smoothing=0.0)
    state, start = TrainState(), time.perf_counter()
    while state.steps < steps:
        batches = copy_batches(min(20, steps - state.steps), 80, generator=gen)
        run_epoch(batches, model, SimpleLossCompute(model.generator, criterion), optimizer, scheduler, train_state=state, progress=False)
    seconds = time.perf_counter() - start
    return seconds, copy_accuracy(model, held)


def recipe_fields(text: str) -> dict:
    "`h=4,batch_size=64` as CopyRecipe fields, each value of its field's type."
    fields, types = {}, {f.name: f.type for f in dataclasses.fields(CopyRecipe)}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in types or name == "seed" or not value:
            raise argparse.ArgumentTypeError(f"expected FIELD=VALUE with a CopyRecipe field other than seed, got {item!r}")
        if types[name] == "bool" and value not in ("True", "False"):
            raise argparse.ArgumentTypeError(f"{name} is True or False, got {value!r}")
        fields[name] = {"int": int, "float": float, "bool": lambda v: v == "True", "str": str}[types[name]](value)
    return fields


def seed_run(recipe: CopyRecipe, held) -> tuple:
    "Train one recipe; returns (steps, seconds, held-out accuracy)."
    start = time.perf_counter()
    history = train_copy(recipe, held_out=held, progress=False).history
    return history[-1]["step"], time.perf_counter() - start, history[-1]["accuracy"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs of the default recipe (median reported)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (the same seed: timing noise only)")
    p.add_argument("--ref-steps", type=int, default=40, help="reference steps to time")
    p.add_argument("--ref-full", action="store_true", help="run the reference's full 400 steps")
    p.add_argument("--seeds", type=int, default=0, help="also train seeds 0..SEEDS-1 once each (median reported)")
    p.add_argument("--against", type=recipe_fields, default=None, metavar="FIELD=VALUE,...",
                   help="with --seeds: also train the default recipe with these CopyRecipe fields changed, "
                        "alternately with the default on each seed")
    p.add_argument("--no-ref", action="store_true", help="skip the Annotated Transformer's recipe")
    a = p.parse_args()
    if a.runs < 0 or a.seeds < 0 or (a.against and not a.seeds):
        p.error("--runs and --seeds must be at least 0, and --against needs --seeds")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    held = held_out_set()
    times, steps = [], []
    for i in range(a.runs):
        start = time.perf_counter()
        history = train_copy(CopyRecipe(seed=a.seed), held_out=held, progress=False).history
        times.append(time.perf_counter() - start)
        steps.append(history[-1]["step"])
        print(f"default recipe run {i + 1}: {history[-1]['accuracy']:.1%} after {steps[-1]} steps in {times[-1]:.1f} s", flush=True)
        assert history[-1]["accuracy"] == 1.0, "did not reach 100%"
    if a.seeds:
        recipes = {"default": {}, **({"against": a.against} if a.against else {})}
        by_seed = {name: [] for name in recipes}
        for seed in range(a.seeds):
            for name, fields in recipes.items():                         # alternately: the same load for both
                by_seed[name].append(seed_run(CopyRecipe(**{**fields, "seed": seed}), held))
        for name, fields in recipes.items():
            runs = by_seed[name]
            steps = [n for n, _, _ in runs]
            label = ", ".join(f"{k}={v}" for k, v in fields.items())
            print("default recipe" if name == "default" else f"against: {label}")
            print(f"  steps to 100%, seeds 0-{a.seeds - 1}: " + " ".join(f"{n}" for n in steps))
            seconds = [t for _, t, _ in runs]
            print(f"  median {statistics.median(steps):.0f} steps ({min(steps)} to {max(steps)}) and "
                  f"{statistics.median(seconds):.2f} s; {sum(seconds) / sum(steps) * 1e3:.1f} ms a step, evaluation "
                  f"included; {sum(acc == 1 for _, _, acc in runs)} of {a.seeds} reached 100%")
        if a.against:
            median = lambda name: statistics.median(t for _, t, _ in by_seed[name])
            print(f"ratio of median seconds: against / default = {median('against') / median('default'):.2f}x")
    if not a.runs or a.no_ref:
        return
    ours = statistics.median(times)
    ref_steps = 400 if a.ref_full else a.ref_steps
    ref_seconds, ref_acc = reference_recipe(ref_steps, held)
    ref_full = ref_seconds / ref_steps * 400
    print(f"reference recipe: {ref_steps} steps in {ref_seconds:.1f} s ({ref_seconds / ref_steps * 1000:.0f} ms/step), "
          f"held-out accuracy {ref_acc:.1%}; full 400 steps {'took' if a.ref_full else 'estimated at'} {ref_full:.0f} s")
    print(f"default recipe: median {ours:.1f} s to 100% (runs: {', '.join(f'{t:.1f}' for t in times)})")
    print(f"ratio: reference full recipe / default recipe = {ref_full / ours:.1f}x")


if __name__ == "__main__":
    main()
