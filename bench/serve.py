"""Translation speed of the shipped translator in PyTorch (`translate`), CTranslate2 (float32 and int8) and ONNX Runtime,
on the Multi30k 2016 test set, text to text, with the same threads and batches (appendix 16).

Each engine runs in a process of its own, started once and kept: two OpenMP thread pools in one process (PyTorch's and
CTranslate2's) slow each other down. The processes take turns, one at a time; each round times every engine once, and a
ratio is CTranslate2 float32's time over the engine's in the same round.

    python bench/serve.py                             # 1,000 sentences in batches of 64, 200 one at a time
    python bench/serve.py --threads 1 --sentences 0   # one at a time, one thread each
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import cpu

ENGINES = ["PyTorch", "PyTorch compiled", "CTranslate2 float32", "CTranslate2 int8", "ONNX Runtime"]


def serve(name: str, folder: str, threads: int, jobs, results):
    "A worker: load engine `name`, then for each job (sentences, beam size, batch size) return (seconds, outputs)."
    import torch
    from transformer_nb.onnx_model import OnnxModel
    from transformer_nb.tokenizer import detokenize
    from transformer_nb.translator import load_pretrained, translate
    torch.set_num_threads(threads)
    model, tokenizer, _ = load_pretrained()
    if name.startswith("PyTorch"):
        if name == "PyTorch compiled":                                 # the cached step chapter 06's loops call
            import transformer_nb.decoding as decoding
            decoding._next_log_probs = torch.compile(decoding._next_log_probs, dynamic=True)
        run = lambda s, k, b: translate(model, tokenizer, s, beam_size=k, length_penalty=0, batch_size=b)
    elif name == "ONNX Runtime":
        onnx = OnnxModel(Path(folder, "onnx"), threads=threads)
        run = lambda s, k, b: translate(onnx, onnx.tokenizer, s, beam_size=k, length_penalty=0, batch_size=b)
    else:
        import ctranslate2
        engine = ctranslate2.Translator(str(Path(folder, name.split()[1])), device="cpu", intra_threads=threads)
        run = lambda s, k, b: [detokenize(r.hypotheses[0]) for r in engine.translate_batch(
            [tokenizer.pieces(x) for x in s], beam_size=k, length_penalty=0, max_batch_size=b)]
    results.put(None)                                                  # loaded
    for sentences, k, batch in iter(jobs.get, None):
        start = time.perf_counter()
        out = run(sentences, k, batch)
        results.put((time.perf_counter() - start, out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="a local folder with the Multi30k files (default: download)")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences decoded in batches (0: none)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--single", type=int, default=200, help="test sentences decoded one at a time (0: none)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--compiled", action="store_true", help="also PyTorch with its decoding step through torch.compile "
                   "(needs a C++ compiler; each case is first run untimed, which compiles)")
    a = p.parse_args()
    engines = [e for e in ENGINES if a.compiled or e != "PyTorch compiled"]
    import torch
    from transformer_nb.data import load_multi30k
    from transformer_nb.export import export_ctranslate2, export_onnx
    from transformer_nb.translator import load_pretrained
    test = [de for de, _ in load_multi30k("test", a.data)]
    cases = [(a.batch_size, k, test[: a.sentences]) for k in (1, 5) if a.sentences]
    cases += [(1, k, test[: a.single]) for k in (1, 5) if a.single]
    with tempfile.TemporaryDirectory() as folder:
        model, tokenizer, _ = load_pretrained()
        export_onnx(Path(folder, "onnx"), model, tokenizer)
        for quantization in ("float32", "int8"):
            export_ctranslate2(Path(folder, quantization), model, tokenizer, quantization=quantization)
        spawn = mp.get_context("spawn")
        workers = {}
        for name in engines:
            jobs, results = spawn.Queue(), spawn.Queue()
            spawn.Process(target=serve, args=(name, folder, a.threads, jobs, results), daemon=True).start()
            results.get()
            jobs.put((test[:100], 1, a.batch_size if a.sentences else 1)), results.get()   # a first, untimed run
            workers[name] = jobs, results
        print(f"{cpu()}, {os.cpu_count()} cores; torch {torch.__version__}, {a.threads} thread"
              f"{'s' if a.threads > 1 else ''} per engine; the shipped translator; Multi30k test 2016; length penalty "
              f"0; sentences/s (median of {a.rounds} rounds); ratio: CTranslate2 float32's time over the engine's, "
              f"the median of the rounds' (each round's after it); same text: outputs equal to PyTorch's")
        print(f"{'batch':>5} {'decoder':>7} {'engine':<20} {'sentences/s':>11} {'ratio':>6} {'rounds':>16} "
              f"{'same text':>10}")
        for batch, k, sentences in cases:
            for jobs, results in workers.values():                     # untimed: compiles what this case needs
                jobs.put((sentences[:20], k, batch)), results.get()
            times, outputs = {name: [] for name in engines}, {}
            for _ in range(a.rounds):
                for name, (jobs, results) in workers.items():          # one engine at a time
                    jobs.put((sentences, k, batch))
                    seconds, outputs[name] = results.get()
                    times[name].append(seconds)
            reference = times["CTranslate2 float32"]
            for name, t in times.items():
                ratios = [r / s for r, s in zip(reference, t)]
                same = sum(x == y for x, y in zip(outputs[name], outputs["PyTorch"]))
                print(f"{batch:>5} {'greedy' if k == 1 else f'beam {k}':>7} {name:<20} "
                      f"{len(sentences) / statistics.median(t):>11.0f} {statistics.median(ratios):>6.2f} "
                      f"{' '.join(f'{r:.2f}' for r in ratios):>16} {same:>5}/{len(sentences)}", flush=True)
        for jobs, _ in workers.values():
            jobs.put(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
