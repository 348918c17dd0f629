"""Measure one change to chapter 08's translation recipe on the validation set: train `TranslationRecipe()` with the
given fields replaced, then score the 1,014 validation sentences with BLEU (beam 5 / alpha 1.2, and greedy) for the
moving average the recipe keeps and for the last weights. The result is added to
`scripts/results/translation_levers.json` under NAME, where chapter 08 reads it (the test set is never scored here).

    python scripts/translation_levers.py --data ../shared/data/multi30k dropout_0.2 dropout=0.2
    python scripts/translation_levers.py --data ../shared/data/multi30k deeper N=3 d_ff=512
    python scripts/translation_levers.py --data ../shared/data/multi30k epochs_30 epochs=30

One run takes as long as the chapter's (about 18 minutes on 2 cores for 20 epochs): run one at a time.
"""
import argparse
import copy
import json
import time
from dataclasses import fields, replace
from pathlib import Path

import torch

from transformer_nb.bleu import bleu
from transformer_nb.checkpoint import read_checkpoint
from transformer_nb.data import load_multi30k
from transformer_nb.files import atomic_write
from transformer_nb.translation_task import TranslationRecipe, train_translation
from transformer_nb.translator import translate

RESULTS = Path(__file__).parent / "results" / "translation_levers.json"


def _override(text: str, recipe: TranslationRecipe) -> tuple[str, object]:
    "`field=value` as the field's own type."
    name, _, value = text.partition("=")
    kinds = {f.name: type(getattr(recipe, f.name)) for f in fields(recipe)}
    if name not in kinds or not value:
        raise SystemExit(f"{text!r}: expected FIELD=VALUE with a TranslationRecipe field ({', '.join(kinds)})")
    try:
        return name, (value.lower() == "true" if kinds[name] is bool else kinds[name](value))
    except ValueError:
        raise SystemExit(f"{text!r}: {name} takes a {kinds[name].__name__}, got {value!r}") from None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="the Multi30k folder")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="PyTorch threads (default: all)")
    p.add_argument("name", help="the name the result is stored under")
    p.add_argument("changes", nargs="*", help="FIELD=VALUE, e.g. dropout=0.2")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    recipe = TranslationRecipe()
    changes = dict(_override(c, recipe) for c in args.changes)
    try:
        recipe = replace(recipe, **changes)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"the changed recipe: {e}") from None
    train, val = load_multi30k("train", args.data), load_multi30k("val", args.data)
    with_save = RESULTS.parent / f".{args.name}.pt"                      # the last weights sit beside the average
    RESULTS.parent.mkdir(exist_ok=True)
    with_save.unlink(missing_ok=True)
    start = time.perf_counter()
    model, tokenizer, history = train_translation(recipe, train, val, progress=False, save=with_save)
    minutes = (time.perf_counter() - start) / 60
    latest = copy.deepcopy(model)
    if recipe.ema:                                                        # else the model is the last weights
        latest.load_state_dict(read_checkpoint(with_save)["extra"]["latest"])
    with_save.unlink()
    sources, references = [de for de, _ in val], [en for _, en in val]
    score = lambda m, beam, alpha: round(bleu(translate(m, tokenizer, sources, beam, alpha,
                                                        precision=recipe.precision), references).score, 2)
    record = dict(changes=changes, threads=args.threads, minutes=round(minutes, 1),
                  loss=[round(h["loss"], 4) for h in history], val_loss=[round(h["val_loss"], 4) for h in history],
                  average=dict(greedy=score(model, 1, 0.0), beam=score(model, recipe.beam_size, recipe.length_penalty)),
                  last=dict(greedy=score(latest.eval(), 1, 0.0),
                            beam=score(latest, recipe.beam_size, recipe.length_penalty)))
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[args.name] = record
    atomic_write(RESULTS, lambda f: f.write((json.dumps(results, indent=1) + "\n").encode()))
    print(args.name, json.dumps(record))


if __name__ == "__main__":
    main()
