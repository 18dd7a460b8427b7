"""Pick block sizes for this device: time each candidate, keep the fastest
correct one, and record it in a block table (see block_table.py). For
example, with your package's name for PACKAGE:

    python -m PACKAGE.tune --shape 4096 4096 4096 --shape 8192 1024 8192 \\
        --dtype bfloat16 --output blocks.json
    export PACKAGE_BLOCK_TABLE=$PWD/blocks.json   # {{ cookiecutter.op_name }} now uses them

It keeps, per shape, the candidate with the least forward plus
jax.value_and_grad time (the blocks serve the backward's matmuls too), and
writes beside it the date, the JAX version and those times. Copy the
entries into block_table.json beside the package to ship them.

The tuner always times the kernel (whatever PACKAGE_IMPLEMENTATION says), and
each candidate is first checked: against the kernel's tiling rules for every
matmul the op makes, forward and backward (candidates they refuse are skipped
with the reason), then against the plain-JAX reference: a block size that
gives a wrong answer (a kernel bug that only some tilings show) is rejected,
never timed, however fast it is (the value and all three gradients are
checked, against the reference computed in float32 from the same operands).
A candidate that does not compile on the device (its tiles overflow VMEM,
say) is rejected with the compiler's message. So every entry it writes is one the kernel
accepts. On a host without the kernel's
hardware the kernel runs in interpret mode: the command still proves the
machinery (and writes an entry for this host's device kind), but its timings
say nothing about the hardware, and it says so.
"""

import argparse
import datetime
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from . import backend, block_table, kernel
from .reference import {{ cookiecutter.op_name }}_reference

# isort: split
from .{{ cookiecutter.op_name }} import kernel_only

# Largest error allowed, relative to the output's largest magnitude. Loose
# enough for TF32 / bfloat16 rounding, far tighter than any tiling bug.
TOLERANCE = {"float32": 1e-2, "bfloat16": 5e-2}


class Trial(NamedTuple):
    blocks: tuple[int, int, int]
    seconds: float | None  # forward, median; None when rejected
    rejected: str  # why it was rejected, "" if it was not
    grad_seconds: float | None = None  # jax.value_and_grad, median; None when rejected

    @property
    def score(self) -> float:
        """What the tuner minimises: a training step's share, forward plus
        value_and_grad (the blocks serve the backward's matmuls too)."""
        return (self.seconds or 0.0) + (self.grad_seconds or 0.0)


def tune(
    m: int,
    k: int,
    n: int,
    dtype: str,
    candidates: Sequence[tuple[int, int, int]],
    repeats: int = 10,
) -> list[Trial]:
    """Check, then time, each candidate on the present device: the forward and
    jax.value_and_grad, each against the reference's."""
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    operands = (a, b, bias)
    # The reference in float32 on the same (rounded) operands: no bfloat16
    # rounding of its own for a candidate's to be compared with.
    reference = jax.jit(_value_and_grad({{ cookiecutter.op_name }}_reference))
    upcast = tuple(x.astype(jnp.float32) for x in operands)
    want = [np.asarray(x, np.float64) for x in _outputs(reference, upcast)]
    trials = []
    for blocks in candidates:
        bm, bn, bk = blocks
        # The kernel itself, not {{ cookiecutter.op_name }}: IMPLEMENTATION_ENV set to
        # reference would have the tuner time the reference, and write blocks
        # the kernel never checked. kernel_only checks the blocks
        # against the kernel's tiling rules, forward and backward, first.
        op = partial(kernel_only, block_m=bm, block_n=bn, block_k=bk)
        forward, training = jax.jit(op), jax.jit(_value_and_grad(op))
        try:
            got = [np.asarray(x, np.float64) for x in _outputs(training, operands)]
        except ValueError as error:  # the kernel's tiling rules refuse it
            trials.append(Trial(blocks, None, f"refused: {error}"))
            continue
        except jax.errors.JaxRuntimeError as error:  # e.g. its tiles overflow VMEM
            first = str(error).strip().splitlines()[0][:200]
            trials.append(Trial(blocks, None, f"does not compile or run: {first}"))
            continue
        # Each of the value, da, db and dbias against the reference's, relative
        # to its own largest magnitude.
        relative = max(
            float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30)
            for g, w in zip(got, want, strict=True)
        )
        if not relative <= TOLERANCE[dtype]:  # also catches NaN
            trials.append(Trial(blocks, None, f"wrong answer: relative error {relative:.2e}"))
            continue
        seconds = _median_seconds(forward, operands, repeats)
        grad_seconds = _median_seconds(training, operands, repeats)
        trials.append(Trial(blocks, seconds, "", grad_seconds))
    return trials


def _value_and_grad(fn: Callable[..., jax.Array]) -> Callable[..., Any]:
    """jax.value_and_grad of sum(fn(a, b, bias)), in float32, in all three."""
    return jax.value_and_grad(lambda *x: jnp.sum(fn(*x).astype(jnp.float32)), argnums=(0, 1, 2))


def _outputs(fn: Callable[..., Any], operands: tuple[jax.Array, ...]) -> list[jax.Array]:
    """The flat outputs of fn(*operands), finished."""
    return jax.tree.leaves(jax.block_until_ready(fn(*operands)))


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
    return min(timed, key=lambda t: t.score) if timed else None


def _size(text: str) -> int:
    """A positive int: an empty operand has nothing to tune (and no bucket)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {value}")
    return value


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
    parser.add_argument(
        "--shape",
        type=_size,
        nargs=3,
        action="append",
        metavar=("M", "K", "N"),
        required=True,
        help="a shape to tune for; repeat it for several (one process opens the device once)",
    )
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="bfloat16")
    parser.add_argument("--output", type=Path, required=True, help="table to add the entry to")
    parser.add_argument("--repeats", type=_size, default=10)
    parser.add_argument(
        "--candidates",
        nargs="+",
        type=_triple,
        metavar="BM,BN,BK",
        help="block_m,block_n,block_k triples (default: kernel.TUNING_CANDIDATES)",
    )
    args = parser.parse_args(argv)
    if export.default_export_platform() != backend.PLATFORM:
        print(
            f"NOTE: no {backend.PLATFORM} device here, so the kernel runs in interpret mode: these "
            "timings mean nothing about the hardware; only the checks and the table's format do."
        )
    candidates = args.candidates or kernel.TUNING_CANDIDATES
    failed = 0
    for m, k, n in args.shape:
        print(f"shape {m}x{k}x{n} (m, k, n), {args.dtype}:")
        trials = tune(m, k, n, args.dtype, candidates, args.repeats)
        failed += not record(trials, m, k, n, args.dtype, args.output)
    return 1 if failed else 0


def record(trials: Sequence[Trial], m: int, k: int, n: int, dtype: str, output: Path) -> bool:
    """Print the trials and write the best to the table; False if none was correct."""
    for trial in trials:
        if trial.seconds is None:
            print(f"  blocks {trial.blocks}: {trial.rejected}")
        else:
            print(
                f"  blocks {trial.blocks}: forward {trial.seconds * 1e3:9.3f} ms,"
                f" value_and_grad {(trial.grad_seconds or 0.0) * 1e3:9.3f} ms"
            )
    chosen = best(trials)
    if chosen is None:
        print("no candidate gave a correct answer: table left unchanged", file=sys.stderr)
        return False
    kind, key = block_table.device_kind(), block_table.bucket(m, k, n)
    measured = {
        "date": datetime.date.today().isoformat(),
        "jax": jax.__version__,
        "shape": [m, k, n],
        "forward_ms": round((chosen.seconds or 0.0) * 1e3, 4),
        "value_and_grad_ms": round((chosen.grad_seconds or 0.0) * 1e3, 4),
        "interpreted": export.default_export_platform() != backend.PLATFORM,
    }
    block_table.write(output, kind, dtype, key, chosen.blocks, measured)
    print(f"{kind} / {dtype} / {key}: {chosen.blocks} -> {output}")
    return True


if __name__ == "__main__":
    sys.exit(main())
