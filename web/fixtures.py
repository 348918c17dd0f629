"""What the Node tests of engine.js (`engine.test.js`) compare with: the PyTorch package's answers, written as JSON beside
the weights the engine loads. No browser is needed.

    python web/fixtures.py && node --test web/     # or let pytest do both: python -m pytest -q web/test_node.py

Written into web/build/: `weights-int8.js` (the shipped translator, or $TRANSFORMER_NB_CKPT, in int8), a small random
model of the other architecture switches (`variant-pre_norm-no_bias-untied.js`) and `node-fixtures.json`:
- `format`, `decoding`: `transformer_nb.web._FORMAT` and the decoding defaults the weights carry;
- `tokenizer`: every Multi30k validation sentence, German and English, with its ids (between <s> and </s>) and
  the text `decode` makes of them;
- `sentences`: test sentences with PyTorch's greedy tokens and their attention maps (per kind, layer and head), and
  beam search's tokens and score for the recipe's beam (5, 1.2) and the paper's (4, 0.6);
- `variant`: the same for the random model, greedy and beam 3 on a few sentences.
PyTorch computes with `_dequantized_model(model, "int8")`: the very numbers the engine computes with.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from reference import HERE, load_model, multi30k, random_model, torch_beam, torch_greedy, torch_maps
from transformer_nb.decoding import BEAM_SIZE, LENGTH_PENALTY
from transformer_nb.files import atomic_write
from transformer_nb.translator import EXTRA_TOKENS
from transformer_nb.web import _FORMAT, _dequantized_model, export_weights

BUILD = HERE / "build"
FIXTURES = BUILD / "node-fixtures.json"
BEAMS = [(BEAM_SIZE, LENGTH_PENALTY), (4, 0.6)]           # the recipe's beam search, and the paper's
VARIANT = dict(pre_norm=True, bias=False, tie_weights=False, share_embeddings=False)


def node_sentences(n: int = 10) -> list[str]:
    "`n` German test sentences, spread over the test set (every 100th)."
    return [de for de, _ in multi30k("test")[::100][:n]]


def _answers(model, tokenizer, sentences: list[str], beams, maps: bool = True) -> list[dict]:
    out = []
    for sentence in sentences:
        greedy = torch_greedy(model, tokenizer, sentence)
        row = {"text": sentence, "greedy": greedy,
               "beams": [dict(beam=b, alpha=a, **dict(zip(("tokens", "score"), torch_beam(model, tokenizer, sentence, b, a))))
                         for b, a in beams]}
        if maps:                                           # the maps of the greedy output: per kind, layer, head
            src = tokenizer.encode(sentence, True, True)
            row["attention"] = {kind: [layer.float().tolist() for layer in layers]
                                for kind, layers in torch_maps(model, tokenizer, src, greedy).items()}
        out.append(row)
    return out


@torch.no_grad()
def write_fixtures(folder: Path = BUILD) -> Path:
    "Export the weights and write node-fixtures.json into `folder`; returns the JSON's path."
    torch.set_num_threads(1)
    model, tokenizer, _ = load_model()
    export_weights(folder / "weights-int8.js", model, tokenizer, "int8")
    variant, variant_tokenizer = random_model(seed=1, **VARIANT)
    export_weights(folder / "variant-pre_norm-no_bias-untied.js", variant, variant_tokenizer, "int8")
    val = [s for pair in multi30k("val") for s in pair]
    fixtures = {
        "format": _FORMAT,
        "decoding": dict(beam_size=BEAM_SIZE, length_penalty=LENGTH_PENALTY, extra_tokens=EXTRA_TOKENS),
        "tokenizer": [[s, ids, tokenizer.decode(ids)] for s in val for ids in [tokenizer.encode(s, True, True)]],
        "sentences": _answers(_dequantized_model(model, "int8"), tokenizer, node_sentences(), BEAMS),
        "variant": _answers(_dequantized_model(variant, "int8"), variant_tokenizer, node_sentences(3), [(3, 1.2)]),
    }
    path = folder / FIXTURES.name
    atomic_write(path, lambda f: f.write(json.dumps(fixtures).encode()))
    return path


if __name__ == "__main__":
    print(write_fixtures(Path(sys.argv[1]) if len(sys.argv) > 1 else BUILD))
