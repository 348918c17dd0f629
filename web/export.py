"""Export a trained transformer_nb translator for the browser.

A page opened from disk (`file://`) may not `fetch` a file next to it, but it may run a classic <script>. So the
weights travel as ONE JavaScript file that assigns a global:

    window.transformerNbWeights = {format, dtype, config, tokenizer, tensors, aliases, data}

- `config`: what engine.js needs to rebuild `make_model`'s architecture (N, d_model, d_ff, h, vocabularies, post- or
  pre-norm, final norm, LayerNorm eps, the positional table's length, ...).
- `tokenizer`: `Tokenizer.state_dict()` (alphabet and merges) and the ids of the special tokens.
- `tensors`: an index, one entry per distinct parameter: name (as in `model.state_dict()`), shape, storage dtype,
  byte offset into `data`, and for int8 the byte offset of its per-row float32 scales.
- `aliases`: names of parameters that are the same tensor as another (`share_embeddings`, `tie_weights`): the tied
  embedding matrix is stored once.
- `data`: all the bytes, little-endian, base64.

Two storage formats ("dtype"):
- "int8": each weight matrix W (out, in) becomes int8 q = round(W / s) with one float32 scale per output row,
  s = max|W[row]| / 127 (symmetric quantization); biases and LayerNorm parameters stay float32.
- "float16": weight matrices in IEEE half precision; biases and LayerNorm parameters stay float32.

`dequantized_model(model, dtype)` returns a copy of the model whose weights are exactly the float32 numbers the
browser computes with after decoding the file: the reference for parity tests and for BLEU in Python.

Usage: python export.py CHECKPOINT OUT_DIR  (writes OUT_DIR/weights-int8.js and OUT_DIR/weights-float16.js)
"""
from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch

from transformer_nb.decoding import max_positions
from transformer_nb.layers import LayerNorm
from transformer_nb.tokenizer import Tokenizer

FORMAT = "transformer_nb-web-1"
DTYPES = ("int8", "float16")
ALIGN = 8                    # every array starts at a multiple of 8 bytes, so JS can view it as a typed array in place


# ---------------------------------------------------------------------------------------------------------------
# 1. How one tensor is stored, and what the browser gets back
# ---------------------------------------------------------------------------------------------------------------
def compressed(name: str, p: torch.Tensor) -> bool:
    "Weight matrices (2-D: projections, feed-forward, embeddings) are compressed; vectors (biases, norms) are not."
    return p.dim() == 2


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8: `w` (out, in) float32 -> (q int8 (out, in), scale float32 (out,)) with w ≈ q * scale.
    A row of zeros (the `<pad>` embedding) gets scale 0 and q 0."""
    w = w.detach().float()
    scale = w.abs().amax(dim=1) / 127.0                                 # float32, one per output row
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))       # avoid 0/0 for an all-zero row
    q = torch.round(w / safe.unsqueeze(1)).clamp(-127, 127).to(torch.int8)   # round half to even
    return q, scale


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    "What engine.js computes at load: `float32(q) * scale`, one float32 multiplication per weight."
    return q.float() * scale.unsqueeze(1)


def browser_tensor(name: str, p: torch.Tensor, dtype: str) -> torch.Tensor:
    "The float32 tensor the browser will hold for parameter `p` stored in `dtype`."
    p = p.detach().float()
    if not compressed(name, p):
        return p.clone()
    if dtype == "int8":
        return dequantize_int8(*quantize_int8(p))
    if dtype == "float16":
        return p.half().float()                                         # round to nearest half, back exactly
    if dtype == "float32":
        return p.clone()
    raise ValueError(f"`dtype` must be one of {DTYPES + ('float32',)}, got {dtype!r}")


@torch.no_grad()
def dequantized_model(model, dtype: str):
    """A copy of `model` (eval mode) whose parameters are exactly what the browser computes with when the weights
    are stored in `dtype` ("int8", "float16"; "float32": an unchanged copy). Tied parameters stay tied."""
    out = copy.deepcopy(model).eval()                                   # deepcopy keeps shared Parameters shared
    for name, p in out.named_parameters():                              # each shared Parameter once
        p.copy_(browser_tensor(name, p, dtype))
    return out


# ---------------------------------------------------------------------------------------------------------------
# 2. The architecture, as engine.js needs it
# ---------------------------------------------------------------------------------------------------------------
def model_config(model) -> dict:
    "The numbers and switches engine.js rebuilds the model from (read from the modules, checked against `config`)."
    cfg = dict(model.config)
    enc_layer = model.encoder.layers[0]
    norms = [m for m in model.modules() if isinstance(m, LayerNorm)]
    eps = {m.eps for m in norms}
    if len(eps) != 1:
        raise ValueError(f"every LayerNorm must share one eps, got {sorted(eps)}")
    if cfg.get("learned_pos"):
        raise NotImplementedError("this prototype exports sinusoidal positional encodings only")
    return dict(
        src_vocab=cfg["src_vocab"], tgt_vocab=cfg["tgt_vocab"], N=len(model.encoder.layers),
        d_model=enc_layer.size, d_ff=enc_layer.feed_forward.w_1.out_features, h=enc_layer.self_attn.h,
        pre_norm=bool(enc_layer.pre_norm),
        final_norm=isinstance(model.encoder.norm, LayerNorm),           # a LayerNorm after each stack, or Identity
        bias=enc_layer.self_attn.w_q.bias is not None,
        layer_norm_eps=eps.pop(),
        max_positions=max_positions(model),                             # rows of the sinusoidal table
        padding_idx=cfg["padding_idx"],
    )


# ---------------------------------------------------------------------------------------------------------------
# 3. The weights script
# ---------------------------------------------------------------------------------------------------------------
class _Buffer:
    "Bytes appended at aligned offsets."
    def __init__(self):
        self.parts, self.size = [], 0

    def add(self, array: np.ndarray) -> int:
        pad = -self.size % ALIGN
        if pad:
            self.parts.append(b"\0" * pad)
            self.size += pad
        offset, raw = self.size, np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        self.parts.append(raw)
        self.size += len(raw)
        return offset

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def weights_object(model, tokenizer: Tokenizer, dtype: str) -> dict:
    "The object the weights script assigns: config, tokenizer, tensor index, aliases and base64 bytes."
    if dtype not in DTYPES:
        raise ValueError(f"`dtype` must be one of {DTYPES}, got {dtype!r}")
    buf, tensors, aliases, first_name = _Buffer(), [], {}, {}
    for name, p in model.named_parameters(remove_duplicate=False):     # every name, shared ones included
        if id(p) in first_name:                                         # a tied/shared parameter: stored once
            aliases[name] = first_name[id(p)]
            continue
        first_name[id(p)] = name
        entry = {"name": name, "shape": list(p.shape)}
        w = p.detach().float()
        if compressed(name, w) and dtype == "int8":
            q, scale = quantize_int8(w)
            entry.update(dtype="int8", offset=buf.add(q.numpy()), scales=buf.add(scale.numpy()))
        elif compressed(name, w):
            entry.update(dtype="float16", offset=buf.add(w.half().numpy()))
        else:
            entry.update(dtype="float32", offset=buf.add(w.numpy()))
        tensors.append(entry)
    return {
        "format": FORMAT,
        "dtype": dtype,
        "config": model_config(model),
        "tokenizer": {**tokenizer.state_dict(), "specials": Tokenizer.specials,
                      "pad": tokenizer.pad, "bos": tokenizer.bos, "eos": tokenizer.eos, "unk": tokenizer.unk},
        "tensors": tensors,
        "aliases": aliases,
        "data": base64.b64encode(buf.bytes()).decode("ascii"),
    }


def export_weights(model, tokenizer: Tokenizer, path, dtype: str = "int8", global_name: str = "transformerNbWeights"):
    "Write the classic script `path` that sets `window[global_name]` to the model's weights stored in `dtype`."
    obj = weights_object(model, tokenizer, dtype)
    data = obj.pop("data")
    head = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))   # ASCII: no charset question for the page
    text = (f"// transformer_nb weights ({dtype}), written by export.py: load with transformerNb.load(window.{global_name})\n"
            f"window.{global_name} = {head[:-1]},\n\"data\":\"{data}\"}};\n")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="ascii")
    return path


if __name__ == "__main__":
    torch.set_num_threads(1)
    from transformer_nb.translator import load_translator
    ckpt, out = sys.argv[1], Path(sys.argv[2])
    model, tok, _ = load_translator(ckpt)
    for dt in DTYPES:
        print(export_weights(model, tok, out / f"weights-{dt}.js", dt), flush=True)
