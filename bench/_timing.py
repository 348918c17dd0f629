"""Shared by the benchmark scripts (run as `python bench/NAME.py`, so this folder is on sys.path)."""
import statistics
import time


def timed(fn, repeats: int) -> float:
    "Median wall time of `repeats` calls of `fn`, in seconds."
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
