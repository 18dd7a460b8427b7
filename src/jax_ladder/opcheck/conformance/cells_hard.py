"""The hard-input cells: hard-<case> for each of HARD_CASES."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compare import WORST

# isort: split
from .declaration import Arg, OpSpec
from .oracles import (
    _diff_args,
    _float,
    _grad,
    _outputs,
    _stack,
    assert_grads,
    assert_outputs,
    cotangents_for,
    drawn,
    ill_conditioned,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import call_as_declared
from .validation import bound_value


# Each case: (rng, shape, dtype, smallest, largest) -> float64 values, where
# smallest and largest are the nonzero magnitudes the argument supports
# (Arg.smallest, Arg.domain). They follow the dtype: where its exp overflows
# (the log of its largest number), where its squares do (the square root of
# it), its smallest normal number and the subnormals below it.
def _exp_edge(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Within 2 of where exp overflows: a softmax without its max subtraction
    divides inf by inf."""
    top = min(math.log(float(jnp.finfo(dtype).max)), largest)
    return top - rng.uniform(0, min(2, top), shape)


def _shifted(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Standard normal, each slice along the first axis shifted by -s, 0 or +s,
    with s beyond where exp overflows (and underflows to zero): a log-sum-exp
    without its max subtraction overflows, one that subtracts a wrong max
    underflows."""
    s = min(1.4 * math.log(float(jnp.finfo(dtype).max)), largest / 2)
    shifts = np.resize(np.array([-s, 0.0, s]), shape[0]) if shape else np.array(s)
    return rng.standard_normal(shape) + shifts.reshape((-1,) + (1,) * (len(shape) - 1))


def _huge(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Magnitudes up to where squares overflow, with random signs."""
    top = min(math.sqrt(float(jnp.finfo(dtype).max)), largest)
    return rng.choice([-1.0, 1.0], shape) * top * rng.uniform(0.25, 1, shape)


def _magnitudes(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Magnitudes log-uniform from 1 to where huge starts, random signs: the
    band between the standard normal and huge, which no other case draws
    (an op that is wrong only for 300 < |x| < 1e17)."""
    top = min(0.25 * math.sqrt(float(jnp.finfo(dtype).max)), largest)
    bottom = min(1.0, top)
    magnitude = np.exp(rng.uniform(math.log(bottom), math.log(top), shape))
    return rng.choice([-1.0, 1.0], shape) * magnitude


def _tiny(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """The smallest normal numbers, and a quarter of them subnormal (or the
    smallest magnitudes the argument supports, where that is more)."""
    tiny = float(jnp.finfo(dtype).smallest_normal)
    if smallest > 0:
        magnitude = max(smallest, tiny) * np.ones(shape)
    else:
        magnitude = tiny * np.where(rng.random(shape) < 0.25, rng.uniform(0.01, 0.5, shape), 1)
    return rng.choice([-1.0, 1.0], shape) * magnitude * rng.uniform(1, 8, shape)


def _zeros(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Zeros of both signs: a log of zero, a division by a norm of zero."""
    return rng.choice([-0.0, 0.0], shape)


def _ties(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Three values, exact in every float dtype, repeated: ties everywhere."""
    return rng.choice([-1.0, 0.5, 2.0], shape)


def _equal(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Every element one value: no spread, a variance of zero."""
    return np.full(shape, rng.standard_normal())


def _nonfinite(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Standard normals with +inf, -inf and NaN among them (each about one
    element in eight; each at least once where there are three elements):
    a ReLU that multiplies by a step gives NaN at -inf, a clamp turns +inf
    into the largest float."""
    values = rng.standard_normal(shape)
    flat = values.reshape(-1)
    special = np.array([np.inf, -np.inf, np.nan])
    picks = rng.random(flat.shape) < 3 / 8
    flat[picks] = rng.choice(special, int(picks.sum()))
    if flat.size >= 3:
        flat[rng.choice(flat.size, 3, replace=False)] = special
    return values


def _masked_rows(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Standard normals with the first row (a slice along the last axis) all
    -inf, and the last all -inf but one element: what an attention mask
    makes of a fully padded row (a log-sum-exp taking its max by hand gives
    NaN there) and of a row with one position left. One row: all -inf."""
    values = rng.standard_normal(shape)
    if not shape:
        return np.array(-np.inf)
    rows = values.reshape(-1, shape[-1])
    rows[0] = -np.inf
    if rows.shape[0] >= 2 and shape[-1] >= 2:
        rows[-1, 1:] = -np.inf
    return values


# The cases with non-finite inputs: the results' non-finite elements exactly
# the oracle's; the gradients held where the oracle's is finite.
NONFINITE_CASES = ("nonfinite", "masked-rows")


HARD_CASES: dict[str, Callable[..., np.ndarray]] = {
    "exp-edge": _exp_edge,
    "shifted": _shifted,
    "huge": _huge,
    "magnitudes": _magnitudes,
    "tiny": _tiny,
    "zeros": _zeros,
    "ties": _ties,
    "equal": _equal,
    "nonfinite": _nonfinite,
    "masked-rows": _masked_rows,
}


# What a hard case makes of a bool or integer argument (without a sample):
# every element its low edge (False, the range's low), its high edge (True,
# high - 1) or one value; the other cases keep make_args' draw. A mask all
# False is what a fully padded sequence gives an attention.
_DISCRETE = {"zeros": "low", "tiny": "low", "huge": "high", "exp-edge": "high", "equal": "one"}


def _discrete(arg: Arg, a: Any, case: str, spec: OpSpec, rng: np.random.Generator) -> Any:
    edge = _DISCRETE.get(case)
    if edge is None or arg.sample is not None or a.size == 0:
        return a
    if a.dtype == jnp.bool_:
        low, high = 0, 2
    elif arg.range is not None:
        low, high = (bound_value(b, spec.sizes) for b in arg.range)
    else:
        return a
    value = {"low": low, "high": high - 1, "one": int(rng.integers(low, high))}[edge]
    return jnp.full(a.shape, value, a.dtype)


def hard_args(spec: OpSpec, case: str, rng: np.random.Generator) -> list[Any]:
    """make_args, with every floating argument drawn from a hard case and
    mapped into its domain (an argument with its own sample keeps it), and
    every bool or integer one at an edge of its values (_DISCRETE)."""
    args = make_args(spec, rng)
    for i, (arg, a) in enumerate(zip(spec.args, args, strict=True)):
        if not _float(a.dtype):
            args[i] = _discrete(arg, a, case, spec, rng)
            continue
        if arg.sample is not None:
            continue
        low, high = arg.domain
        largest = max(abs(low), abs(high))
        values = HARD_CASES[case](rng, a.shape, a.dtype, arg.smallest, largest)
        if low >= 0:
            values = np.abs(values)
        elif high <= 0:
            values = -np.abs(values)
        args[i] = jnp.asarray(np.clip(values, low, high), a.dtype)
    drawn("hard", args)
    return args


def flushed(args: list[Any]) -> list[Any]:
    """args with their subnormal values replaced by zeros of the same sign."""
    out = []
    for a in args:
        if _float(a.dtype):
            values = np.asarray(a, np.float64)
            small = np.abs(values) < float(jnp.finfo(a.dtype).smallest_normal)
            a = jnp.asarray(np.where(small, np.copysign(0.0, values), values), a.dtype)
        out.append(a)
    return out


def _either(check: Callable[[Any], None], wants: list[Any]) -> None:
    """check passes for one of wants (the first one that does is kept in the
    worst-case record of compare.py, not a failed alternative)."""
    for i, want in enumerate(wants):
        seen = dict(WORST)
        try:
            check(want)
            return
        except AssertionError:
            WORST.update(seen)
            if i == len(wants) - 1:
                raise


def check_hard(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """One hard case, eagerly, jitted, under vmap (two draws of it) and
    differentiated against random cotangents: each transformation compared
    apart, and a failure lists every one that missed the oracle (one that
    misses does not hide the others); an error raised propagates at once, so
    a declared refusal still matches it.

    Where an input is subnormal, the op may see it as it is or as zero: XLA's
    CPU treats subnormal operands of arithmetic as zeros (and flushes subnormal
    results), but an op that moves a value without arithmetic keeps it. The
    op must match the oracle of one or the other, for the whole result."""
    case = cell.removeprefix("hard-")
    args, more = hard_args(spec, case, rng), hard_args(spec, case, rng)
    views = [args, flushed(args)] if case == "tiny" else [args]
    also = [more, flushed(more)] if case == "tiny" else [more]
    wants = [oracle(spec, view) for view in views]
    # Declared ill-conditioned: each element also within a multiple of the
    # reference's own error, computed as the op's result is.
    hard = ill_conditioned(spec, cell) is not None
    missed: list[tuple[str, AssertionError]] = []

    def part(name: str, compare: Callable[[], None]) -> None:
        try:
            compare()
        except AssertionError as error:
            missed.append((name, error))

    def values(fn: Callable[..., Any], where: str) -> None:
        got = call_as_declared(fn, *args)
        ref = _outputs(jax.jit(spec.reference)(*args)) if hard else None
        _either(lambda want: assert_outputs(spec, got, want, where, args, reference=ref), wants)

    part("eager", lambda: values(spec.op, "eager"))
    part("jit", lambda: values(jax.jit(spec.op), "jit"))
    part("jit(vmap)", lambda: _batched_values(spec, args, more, wants, also, hard))
    if _diff_args(spec):
        part("jit(grad)", lambda: _gradients(spec, case, args, views, hard, rng))
    if not missed:
        return
    first = str(missed[0][1]).splitlines()
    if len(missed) > 1:  # the others that missed, each of which may need its own fix
        others = ", ".join(name for name, _ in missed[1:])
        first.insert(1, f"  also missed the oracle: {others}")
    raise AssertionError("\n".join(first)) from missed[0][1]


def _batched_values(
    spec: OpSpec, args: list[Any], more: list[Any], wants: list[Any], also: list[Any], hard: bool
) -> None:
    """jit(vmap) of the op over two draws of the case."""
    batched = [jnp.stack([a, b]) for a, b in zip(args, more, strict=True)]
    stacked = [
        _stack([want, oracle(spec, view)], axis=0) for want, view in zip(wants, also, strict=True)
    ]
    got = call_as_declared(jax.jit(jax.vmap(spec.op)), *batched)
    ref = _outputs(jax.jit(jax.vmap(spec.reference))(*batched)) if hard else None
    check = partial(
        assert_outputs,
        spec,
        got,
        where="jit(vmap), two draws",
        batched=batched,
        reference=ref,
        in_axes=[0] * len(batched),
        out_axes=0,
    )
    _either(lambda want: check(want=want), stacked)


def _gradients(
    spec: OpSpec,
    case: str,
    args: list[Any],
    views: list[list[Any]],
    hard: bool,
    rng: np.random.Generator,
) -> None:
    """jit(grad) of the op's random weighting, against the oracle's (held
    where the oracle's is finite, in the non-finite cases)."""
    cts = cotangents_for(spec, args, rng)
    grads = call_as_declared(jax.jit(_grad(spec, spec.op, cts)), *args)
    ref = jax.jit(_grad(spec, spec.reference, cts))(*args) if hard else None
    wants = [vjp_oracle(spec, view, cts) for view in views]
    if case in NONFINITE_CASES:
        wants = [_where_finite(want, grads) for want in wants]
    _either(
        lambda want: assert_grads(spec, grads, want, "jit(grad)", args, reference=ref),
        wants,
    )


def _where_finite(want: list[np.ndarray], got: Any) -> list[np.ndarray]:
    """The oracle's gradients where finite, the op's elsewhere: a gradient
    at an infinite input is whatever each formula makes of inf - inf, and
    only the finite ones say the op is right."""
    got = got if isinstance(got, (tuple, list)) else [got]
    return [
        np.where(np.isfinite(w), w, np.asarray(g, np.float64))
        for w, g in zip(want, got, strict=True)
    ]
