"""Trains a tiny copy-task model a few steps, as one process or as one of several under torchrun, and saves the
results; tests/test_distributed.py compares the two. Usage: [torchrun --nproc-per-node=2] ddp_worker.py OUTDIR"""
import sys
from pathlib import Path

import torch

from transformer_nb.copy_task import CopyRecipe
from transformer_nb.distributed import world_from_env
from transformer_nb.model import make_model
from transformer_nb.fit import train
from transformer_nb.schedule import noam_optimizer

SCENARIOS = {"plain": dict(epochs=2, accum_iter=1), "accumulate": dict(epochs=2, accum_iter=2),
             "first_epoch": dict(epochs=1, accum_iter=1)}
RECIPE = CopyRecipe(batch_size=7, batches_per_epoch=5)   # 7 rows: parts of 4 and 3, of different lengths


def tiny_model():
    torch.manual_seed(0)
    return make_model(11, 11, N=2, d_model=32, d_ff=64, h=4, dropout=0.0, padding_idx=0)


def run(name, world=None, save=None, resume=None, epochs=None):
    "Train scenario `name` from seed 0 (or continue `resume`); returns (model, history)."
    model = tiny_model()
    optimizer, scheduler = noam_optimizer(model, 1.0, 10)
    s = SCENARIOS[name]
    history = train(lambda epoch: RECIPE.batches(epoch), model, optimizer=optimizer, scheduler=scheduler,
                    epochs=epochs or s["epochs"], smoothing=0.1, accum_iter=s["accum_iter"], save=save, resume=resume,
                    world=world, progress=False)
    return model, history


if __name__ == "__main__":
    out = Path(sys.argv[1])
    world = world_from_env()
    for name in SCENARIOS:
        save = out / f"{name}.ckpt" if name == "first_epoch" else None
        model, history = run(name, world, save=save)
        if world.is_main:
            torch.save({"model": model.state_dict(), "history": history, "size": world.size}, out / f"{name}.pt")
    if world.size > 1:                                   # each process draws from its own seed: refused on every process
        try:
            train(lambda epoch: CopyRecipe(seed=world.rank).batches(epoch), tiny_model(), epochs=1, world=world,
                  progress=False)
        except ValueError as e:
            if world.is_main:
                (out / "mismatch.txt").write_text(str(e))
        world.close()
