"""The PyTorch side of the parity tests and the benchmark: which model, and what PyTorch decodes.

Every reference decodes ONE sentence exactly as `transformer_nb.translator.translate` would if the sentence were
alone in its batch (the browser translates one sentence at a time): ids between <s> and </s>, a padding keep-mask,
`max_length` = source length + 50 capped by the positional table, `padding_idx=tokenizer.pad`.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import torch

from transformer_nb.data import load_multi30k
from transformer_nb.decoding import beam_search, greedy_decode
from transformer_nb.embedding import max_positions
from transformer_nb.masks import padding_mask, subsequent_mask
from transformer_nb.model import attention_maps, make_model
from transformer_nb.tokenizer import Tokenizer
from transformer_nb.translator import PRETRAINED_TRANSLATOR, load_translator

HERE = Path(__file__).resolve().parent
MULTI30K = Path(os.environ.get("MULTI30K_DIR", HERE.parents[1] / "shared" / "data" / "multi30k"))   # beside the repository
# the model the tests check: the translator the package ships, or another one ($TRANSFORMER_NB_CKPT)
CHECKPOINT = Path(os.environ.get("TRANSFORMER_NB_CKPT", PRETRAINED_TRANSLATOR))


@lru_cache(maxsize=None)
def multi30k(split: str) -> list[tuple[str, str]]:
    return load_multi30k(split, MULTI30K)


def random_model(seed: int = 0, **options):
    """A small untrained model with a tokenizer learned from 300 Multi30k pairs, for architectures the shipped
    translator does not have. `options`: other `make_model` arguments (pre_norm=True, bias=False, ...)."""
    torch.manual_seed(seed)
    pairs = multi30k("train")[:300]
    tokenizer = Tokenizer.train([s for pair in pairs for s in pair], vocab=600)
    V = len(tokenizer)
    options = dict(dict(tie_weights=True, share_embeddings=True), **options)
    model = make_model(V, V, N=2, d_model=32, d_ff=64, h=4, padding_idx=tokenizer.pad, **options)
    return model.eval(), tokenizer


@lru_cache(maxsize=None)
def load_model():
    "(model, tokenizer, description): the translator in CHECKPOINT (the shipped one unless $TRANSFORMER_NB_CKPT)."
    torch.set_num_threads(1)
    model, tokenizer, history = load_translator(CHECKPOINT)
    return model.eval(), tokenizer, f"{CHECKPOINT} ({len(history)} epochs of training)"


def _source(tokenizer, sentence: str):
    ids = tokenizer.encode(sentence, True, True)
    src = torch.tensor([ids])                                           # (1, len_src)
    return ids, src, padding_mask(src, tokenizer.pad)


def _max_length(model, n_src: int) -> int:
    limit = max_positions(model)
    return min(n_src + 50, limit) if limit is not None else n_src + 50


@torch.no_grad()
def torch_greedy(model, tokenizer, sentence: str) -> list[int]:
    ids, src, mask = _source(tokenizer, sentence)
    ys = greedy_decode(model, src, mask, _max_length(model, len(ids)), start_symbol=tokenizer.bos,
                       end_symbol=tokenizer.eos, padding_idx=tokenizer.pad)
    return ys[0].tolist()


@torch.no_grad()
def torch_beam(model, tokenizer, sentence: str, beam: int, alpha: float) -> tuple[list[int], float]:
    ids, src, mask = _source(tokenizer, sentence)
    ys, score = beam_search(model, src, mask, _max_length(model, len(ids)), start_symbol=tokenizer.bos,
                            end_symbol=tokenizer.eos, beam_size=beam, length_penalty=alpha,
                            padding_idx=tokenizer.pad, return_scores=True)
    return ys[0].tolist(), float(score[0])


@torch.no_grad()
def torch_maps(model, tokenizer, src_ids: list[int], out_ids: list[int]) -> dict:
    """`attention_maps` for the source and the decoder's input (the output without its last token): per kind, per
    layer, a (h, len_q, len_k) float64 tensor."""
    src = torch.tensor([src_ids])
    tgt = torch.tensor([out_ids[:-1]])
    maps = attention_maps(model, src, tgt, padding_mask(src, tokenizer.pad), subsequent_mask(tgt.size(1)))
    return {kind: [layer[0].double() for layer in layers] for kind, layers in maps.items()}

