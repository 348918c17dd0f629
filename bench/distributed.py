"""Data parallelism on this CPU: 2 processes x 1 thread (torchrun, gloo) against 1 process x 2 threads, training on
the same batches with appendix 11's `train`. Runs alternate; the script prints each run's training speed (label tokens
per second, the first epoch left out as warm-up) and the median ratio.

    python bench/distributed.py                      # the copy task, then a translation-sized model
    python bench/distributed.py --task copy --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from transformer_nb.copy_task import CopyRecipe
from transformer_nb.distributed import world_from_env
from transformer_nb.model import make_model
from transformer_nb.fit import train
from train_step import batches                               # bench/ is on sys.path: run as python bench/NAME.py

COPY = CopyRecipe()                                          # chapter 07's recipe: its model, batches and smoothing
TASKS = {  # name: (model arguments, label smoothing, description)
    "copy": (dict(src_vocab=COPY.vocab, tgt_vocab=COPY.vocab, N=COPY.N, d_model=COPY.d_model, d_ff=COPY.d_ff, h=COPY.h,
                  dropout=COPY.dropout), COPY.smoothing,
             f"copy task (CopyRecipe: d_model {COPY.d_model}, {COPY.h} heads, {COPY.N}+{COPY.N} layers, "
             f"{COPY.batches_per_epoch} batches of {COPY.batch_size} sequences per epoch)"),
    "translation": (dict(src_vocab=4000, tgt_vocab=4000, N=2, d_model=256, d_ff=1024, h=4, dropout=0.1), 0.1,
                    "translation-sized model (TranslationRecipe's sizes: d_model 256, 2+2 layers, one shared vocabulary "
                    "of 4000; dropout 0.1 everywhere; 12 batches of 64 pairs of about 15 tokens per epoch)"),
}


def translation_batches(epoch: int):
    "12 batches of 64 random sentence pairs of about 15 tokens (train_step.py's), the same for every process."
    return batches(12, 64, 4000, 15, torch.Generator().manual_seed(epoch))


def worker(task: str, epochs: int):
    "Train `epochs` epochs as this process (alone, or one of several under torchrun); rank 0 prints tokens/s as JSON."
    world = world_from_env()
    torch.manual_seed(0)
    model = make_model(**TASKS[task][0], padding_idx=0, tie_weights=task == "translation",
                       share_embeddings=task == "translation")            # as chapter 08's recipe
    data = (lambda e: COPY.batches(e)) if task == "copy" else translation_batches
    tokens = sum(b.ntokens for b in data(2))                          # every epoch has about as many
    times = []
    train(data, model, epochs=epochs, smoothing=TASKS[task][1], progress=False, world=world,
          on_epoch=lambda r: times.append(r["seconds"]))
    if world.is_main:
        per_epoch = statistics.median(b - a for a, b in zip(times, times[1:]))   # epoch 1 is warm-up
        print(json.dumps({"tokens_per_s": tokens / per_epoch, "seconds_per_epoch": per_epoch}), flush=True)
    if world.size > 1:
        world.close()


def launch(mode: str, task: str, epochs: int) -> dict:
    args = [__file__, "--worker", task, "--epochs", str(epochs)]
    if mode == "2x1":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", *args]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
    else:
        cmd, env = [sys.executable, *args], {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=[*TASKS, "all"], default="all")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs of each layout")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run (the first is warm-up)")
    p.add_argument("--worker", choices=list(TASKS), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        return worker(a.worker, a.epochs)
    print(f"{os.cpu_count()} CPU cores; PyTorch {torch.__version__}")
    for task in TASKS if a.task == "all" else [a.task]:
        print(f"\n{TASKS[task][2]}")
        speeds = {"1x2": [], "2x1": []}
        for r in range(a.rounds):
            for mode in speeds:                                         # alternate: same machine state for both
                start = time.perf_counter()
                result = launch(mode, task, a.epochs)
                speeds[mode].append(result["tokens_per_s"])
                print(f"  round {r + 1}  {'1 process x 2 threads' if mode == '1x2' else '2 processes x 1 thread'}: "
                      f"{result['tokens_per_s']:8.0f} tokens/s  ({time.perf_counter() - start:4.1f} s with start-up)",
                      flush=True)
        ratios = [b / a for a, b in zip(speeds["1x2"], speeds["2x1"])]
        print(f"  2 processes x 1 thread run at {statistics.median(ratios):.2f}x the speed of 1 process x 2 threads "
              f"(median of {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
