"""The translator the package ships (`load_pretrained`) is chapter 08's model: it reproduces the test BLEU that the
chapter's stored run prints, within 0.3, and stays within the size the repository allows."""
import json
import os
import re
from pathlib import Path

import pytest

from transformer_nb.translator import PRETRAINED_TRANSLATOR, load_pretrained, translate

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k"))


def chapter_test_bleu() -> float:
    "The recipe's test BLEU as chapter 08's stored output prints it (`beam 5, alpha 1.2 BLEU = 40.85 ...`)."
    nb = json.loads((ROOT / "nbs" / "08_translation.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])
    found = re.findall(r"^beam 5, alpha 1\.2 +BLEU = (\d+\.\d+)", text, re.M)
    assert len(found) == 1, f"chapter 08 prints the recipe's test BLEU once, found {found}"
    return float(found[0])


def test_the_shipped_file_is_at_most_10_mb_and_packaged():
    assert PRETRAINED_TRANSLATOR.stat().st_size <= 10_000_000
    assert "recursive-include transformer_nb/pretrained *.pt" in (ROOT / "MANIFEST.in").read_text()


@pytest.mark.skipif(not (DATA / "test_2016_flickr.de.gz").exists() and not (DATA / "test_2016_flickr.de").exists(),
                    reason="Multi30k's test set is not here")
def test_the_shipped_translator_reproduces_the_chapters_test_bleu():
    from transformer_nb.bleu import bleu
    from transformer_nb.data import load_multi30k
    from transformer_nb.translation_task import TranslationRecipe

    model, tokenizer, history = load_pretrained()
    recipe = TranslationRecipe()
    assert len(history) == recipe.epochs
    test = load_multi30k("test", DATA)
    out = translate(model, tokenizer, [de for de, _ in test], recipe.beam_size, recipe.length_penalty,
                    precision=recipe.precision)
    score = bleu(out, [en for _, en in test]).score
    assert abs(score - chapter_test_bleu()) <= 0.3, (score, chapter_test_bleu())


def test_the_shipped_weights_are_the_trained_ones():
    """The shipped file was re-saved in this version's checkpoint format (its W^Q, W^K, W^V stacked into `w_qkv`): its
    weights are, bit for bit, those chapter 08's run trained (the digest of the earlier file's weights, stacked the same
    way), so it translates as it did."""
    import hashlib
    import torch
    weights = torch.load(PRETRAINED_TRANSLATOR, weights_only=True)["model"]
    digest = hashlib.sha256()
    for name, tensor in weights.items():
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    assert digest.hexdigest() == "5d7192a9db90c8e77e3a42fe2f968076b4122022d78d4fecc8cf04d77fa5c39c"
