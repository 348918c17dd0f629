"""Shared by the benchmark scripts (run as `python bench/NAME.py`, so this folder is on sys.path)."""
import platform
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


def cpu() -> str:
    "The processor's name, as Linux reports it (else what Python knows)."
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
