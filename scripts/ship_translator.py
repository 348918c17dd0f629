"""Write the German→English translator the package ships, `transformer_nb/pretrained/multi30k-de-en.pt`: chapter 08's
recipe trained on Multi30k, with its weights stored in float16 (9.5 MB instead of 19 MB), then print its test BLEU
scored as chapter 08 scores it. Run it again whenever the recipe changes.

    python scripts/ship_translator.py --data ../shared/data/multi30k              # trains the recipe (about 18 min on 2 cores)
    python scripts/ship_translator.py --data ../shared/data/multi30k --checkpoint run.pt   # ships a model already trained

`--checkpoint` takes a translator trained with the recipe's defaults (`transformer-nb translate --save run.pt`, which
trains exactly what chapter 08 trains: the same seeds give the same weights).
"""
import argparse
import copy
import sys
from pathlib import Path


from transformer_nb.bleu import bleu
from transformer_nb.data import load_multi30k
from transformer_nb.translation_task import TranslationRecipe, train_translation
from transformer_nb.translator import PRETRAINED_TRANSLATOR, load_translator, save_translator, translate


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="the Multi30k folder (see shared/data's README)")
    p.add_argument("--checkpoint", type=Path, help="a translator trained with the recipe's defaults, instead of training")
    p.add_argument("--out", type=Path, default=PRETRAINED_TRANSLATOR, help=f"default: {PRETRAINED_TRANSLATOR}")
    args = p.parse_args(argv)
    recipe = TranslationRecipe()
    if args.checkpoint is not None:
        model, tokenizer, history = load_translator(args.checkpoint)
    else:
        model, tokenizer, history = train_translation(recipe, load_multi30k("train", args.data),
                                                      load_multi30k("val", args.data))
    shipped = copy.deepcopy(model).half()                                   # float16 weights: half the file
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_translator(args.out, shipped, tokenizer, history, overwrite=True)
    model, tokenizer, _ = load_translator(args.out)                         # read back as float32, as a user gets it
    test = load_multi30k("test", args.data)
    out = translate(model, tokenizer, [de for de, _ in test], recipe.beam_size, recipe.length_penalty,
                    precision=recipe.precision)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.2f} MB, {len(history)} epochs of training")
    print(f"test BLEU, beam {recipe.beam_size}, alpha {recipe.length_penalty}: {bleu(out, [en for _, en in test])}")


if __name__ == "__main__":
    sys.exit(main())
