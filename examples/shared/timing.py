"""The median time of jitted calls, as the examples' bench.py report it, by the kit's one
timing rule, the one every generated project's benchmarks/timing.py has: a warm-up call first
(it compiles), then repeated calls in alternation, each ended by `jax.block_until_ready` (JAX
dispatches asynchronously: without it a call's time would be that of queueing the work). And
their command line: each takes --quick, the few sizes and repeats its test runs."""

import argparse

from jax_ladder.project_files.benchmarks import timing

__all__ = ["bench_arguments", "median_seconds", "median_times"]


def median_times(programs, args, repeats):
    """{name: median seconds of one call} for each of `programs` ({name: function}), all called
    with `args`, `repeats` times each, taking turns."""
    times = timing.median_seconds(list(programs.values()), args, repeats)
    return dict(zip(programs, times, strict=True))


def median_seconds(fn, args, repeats):
    """Median seconds of one call of fn(*args), after a warm-up call."""
    return timing.median_seconds([fn], args, repeats)[0]


def bench_arguments(doc, quick):
    """A bench.py's command line: its docstring's first line as the description, and
    --quick, whose help says what a quick run leaves out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser
