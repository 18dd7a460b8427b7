"""The median time of jitted calls, as the examples' bench.py report it: a warm-up call first
(it compiles), then repeated calls, each ended by `jax.block_until_ready` (JAX dispatches
asynchronously: without it a call's time would be that of queueing the work). And their
command line: each takes --quick, the few sizes and repeats its test runs."""

import argparse
import statistics
import time

import jax

__all__ = ["bench_arguments", "median_seconds", "median_times"]


def median_times(programs, args, repeats):
    """{name: median seconds of one call} for each of `programs` ({name: function}), all called
    with `args`: a warm-up call each, then `repeats` rounds in which the programs take turns,
    one call each, so that a busy machine slows them alike."""
    for program in programs.values():
        jax.block_until_ready(program(*args))  # warm-up (and compile)
    times = {name: [] for name in programs}
    for _ in range(repeats):
        for name, program in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(program(*args))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def median_seconds(fn, args, repeats):
    """Median seconds of one call of fn(*args), after a warm-up call."""
    return median_times({"fn": fn}, args, repeats)["fn"]


def bench_arguments(doc, quick):
    """A bench.py's command line: its docstring's first line as the description, and
    --quick, whose help says what a quick run leaves out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser
