"""How benchmarks/bench.py times a call: the one timing rule of this project.

Each function runs once before timing (compilation and first-run costs stay
out), every timed call ends in jax.block_until_ready (JAX dispatches
asynchronously: without it the clock stops before the device does), and the
median of the repeats is reported (one slow call, a page fault or another
process, does not move it). Functions timed together run in alternation,
each going first as often as the others, so that drift on a shared machine
hits all of them alike and no side gains from the cache the other warmed.
"""

import statistics
import time

import jax


def median_seconds(fns, args, repeats, *, seconds=0.0, pause=0.0):
    """The median time of each of `fns` called on `args`, in the order of `fns`.

    `seconds`: short calls get more repeats, about that long per function
    (at most 2,000 in all), so that a microsecond's noise does not decide a
    ratio. `pause`: seconds to wait after each call, with its result already
    freed, for a runtime that frees results on a worker thread (XLA does for
    some programs on the CPU): the timed region then charges no side for
    another's frees.
    """
    for fn in fns:
        jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    if seconds:
        start = time.perf_counter()
        jax.block_until_ready(fns[0](*args))
        first = max(time.perf_counter() - start, 1e-6)
        repeats = max(repeats, min(2000, int(seconds / first)))
    times = [[] for _ in fns]
    for i in range(repeats):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for k in order:
            start = time.perf_counter()
            result = jax.block_until_ready(fns[k](*args))
            times[k].append(time.perf_counter() - start)
            del result  # freed outside the timed region
            if pause:
                time.sleep(pause)
    return [statistics.median(t) for t in times]
