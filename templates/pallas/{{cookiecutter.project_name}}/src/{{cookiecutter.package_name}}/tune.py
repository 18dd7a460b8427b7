"""Pick block sizes for this device: time each candidate, keep the fastest
correct one, and record it in a block table (see block_table.py). For
example, with your package's name for PACKAGE:

    python -m PACKAGE.tune --shape 4096 4096 4096 --dtype bfloat16 --output blocks.json
    export PACKAGE_BLOCK_TABLE=$PWD/blocks.json   # {{ cookiecutter.op_name }} now uses them

The tuner always times the kernel (whatever PACKAGE_IMPLEMENTATION says), and
each candidate is first checked: against the kernel's tiling rules for every
matmul the op makes, forward and backward (candidates they refuse are skipped
with the reason), then against the plain-JAX reference: a block size that
gives a wrong answer (a kernel bug that only some tilings show) is rejected,
never timed, however fast it is. So every entry it writes is one the kernel
accepts. On a host without the kernel's
hardware the kernel runs in interpret mode: the command still proves the
machinery (and writes an entry for this host's device kind), but its timings
say nothing about the hardware, and it says so.
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from . import block_table, kernel
from .reference import {{ cookiecutter.op_name }}_reference

# isort: split
from .{{ cookiecutter.op_name }} import kernel_only

# Largest error allowed, relative to the output's largest magnitude. Loose
# enough for TF32 / bfloat16 rounding, far tighter than any tiling bug.
TOLERANCE = {"float32": 1e-2, "bfloat16": 5e-2}


class Trial(NamedTuple):
    blocks: tuple[int, int, int]
    seconds: float | None  # median time; None when rejected
    rejected: str  # why it was rejected, "" if it was not


def tune(
    m: int,
    k: int,
    n: int,
    dtype: str,
    candidates: Sequence[tuple[int, int, int]],
    repeats: int = 10,
) -> list[Trial]:
    """Check, then time, each candidate on the present device."""
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    want = np.asarray({{ cookiecutter.op_name }}_reference(a, b, bias), np.float64)
    scale = max(float(np.max(np.abs(want))), 1e-30)
    trials = []
    for blocks in candidates:
        bm, bn, bk = blocks
        # The kernel itself, not {{ cookiecutter.op_name }}: IMPLEMENTATION_ENV set to
        # reference would have the tuner time the reference, and write blocks
        # the kernel never checked. kernel_only checks the blocks
        # against the kernel's tiling rules, forward and backward, first.
        run = jax.jit(partial(kernel_only, block_m=bm, block_n=bn, block_k=bk))
        try:
            got = np.asarray(run(a, b, bias), np.float64)
        except ValueError as error:  # the kernel's tiling rules refuse it
            trials.append(Trial(blocks, None, f"refused: {error}"))
            continue
        relative = float(np.max(np.abs(got - want))) / scale
        if not relative <= TOLERANCE[dtype]:  # also catches NaN
            trials.append(Trial(blocks, None, f"wrong answer: relative error {relative:.2e}"))
            continue
        trials.append(Trial(blocks, _median_seconds(run, (a, b, bias), repeats), ""))
    return trials


def _median_seconds(
    fn: Callable[..., jax.Array], args: tuple[jax.Array, ...], repeats: int
) -> float:
    jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best(trials: Sequence[Trial]) -> Trial | None:
    timed = [t for t in trials if t.seconds is not None]
    return min(timed, key=lambda t: t.seconds or 0.0) if timed else None


def _triple(text: str) -> tuple[int, int, int]:
    """ "128,128,64" -> (128, 128, 64)."""
    block_m, block_n, block_k = (int(size) for size in text.split(","))
    return block_m, block_n, block_k


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__package__}.tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--shape", type=int, nargs=3, metavar=("M", "K", "N"), required=True)
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="bfloat16")
    parser.add_argument("--output", type=Path, required=True, help="table to add the entry to")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--candidates",
        nargs="+",
        type=_triple,
        metavar="BM,BN,BK",
        help="block_m,block_n,block_k triples (default: kernel.TUNING_CANDIDATES)",
    )
    args = parser.parse_args(argv)
    if export.default_export_platform() != kernel.PLATFORM:
        print(
            f"NOTE: no {kernel.PLATFORM} device here, so the kernel runs in interpret mode: these "
            "timings mean nothing about the hardware; only the checks and the table's format do."
        )
    m, k, n = args.shape
    candidates = args.candidates or kernel.TUNING_CANDIDATES
    trials = tune(m, k, n, args.dtype, candidates, args.repeats)
    for trial in trials:
        result = f"{trial.seconds * 1e3:9.3f} ms" if trial.seconds is not None else trial.rejected
        print(f"  blocks {trial.blocks}: {result}")
    chosen = best(trials)
    if chosen is None:
        print("no candidate gave a correct answer: table left unchanged", file=sys.stderr)
        return 1
    kind, key = block_table.device_kind(), block_table.bucket(m, k, n)
    block_table.write(args.output, kind, args.dtype, key, chosen.blocks)
    print(f"{kind} / {args.dtype} / {key}: {chosen.blocks} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
