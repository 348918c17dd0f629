"""BLEU on the Multi30k validation set, in Python, of the float32 weights and of the weights the browser gets
(int8 and float16, dequantized), with the recipe's beam search (beam 5, length penalty 1.2); and float32 once more
with one sentence per batch, as the browser decodes.

Run once (a few minutes of CPU per dtype):  OMP_NUM_THREADS=1 python bleu_eval.py [N_SENTENCES]
Writes results/bleu.json.
"""
import json
import sys
import time

import torch

from export import dequantized_model
from reference import HERE, load_model, multi30k
from transformer_nb.bleu import bleu, bleu_signature
from transformer_nb.translator import translate

BEAM, ALPHA = 5, 1.2

if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tokenizer, description = load_model()
    pairs = multi30k("val")[: int(sys.argv[1]) if len(sys.argv) > 1 else None]
    sources, references = [de for de, _ in pairs], [en for _, en in pairs]
    results, outputs = {"model": description, "sentences": len(pairs), "beam": BEAM, "alpha": ALPHA,
                        "signature": bleu_signature()}, {}
    for dtype in ("float32", "int8", "float16"):
        start = time.perf_counter()
        outputs[dtype] = translate(dequantized_model(model, dtype), tokenizer, sources, beam_size=BEAM,
                                   length_penalty=ALPHA)
        results[dtype] = {"bleu": round(bleu(outputs[dtype], references).score, 2),
                          "seconds": round(time.perf_counter() - start, 1),
                          "differ_from_float32": sum(a != b for a, b in zip(outputs[dtype], outputs["float32"]))}
        print(dtype, results[dtype], flush=True)
    # the browser translates one sentence at a time: the same as translate(..., batch_size=1). Does batching matter?
    start = time.perf_counter()
    alone = translate(model, tokenizer, sources, beam_size=BEAM, length_penalty=ALPHA, batch_size=1)
    results["float32_one_sentence_per_batch"] = {
        "bleu": round(bleu(alone, references).score, 2), "seconds": round(time.perf_counter() - start, 1),
        "differ_from_float32": sum(a != b for a, b in zip(alone, outputs["float32"]))}
    print("float32, batch_size=1", results["float32_one_sentence_per_batch"], flush=True)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "bleu.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
