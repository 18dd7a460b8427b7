"""Oracles for prefix_sum / suffix_sum, written without custom_partitioning, and the error bound
the tests and the benchmark hold every result to.

1. `prefix_sum_reference` / `suffix_sum_reference`: plain JAX (`jnp.cumsum`, and
   `lax.cumsum(..., reverse=True)`). Differentiated by ordinary autodiff, and partitioned by
   XLA alone: with the length axis sharded, XLA gathers whole rows (the tests and bench.py
   measure it).
2. `prefix_sum_f64` / `suffix_sum_f64`: float64 NumPy, independent of JAX entirely.

Why a bound that grows with the length: a sum of floats depends on the order of the additions,
and the sharded op adds in a different order than a sequential cumsum does (each block, then
the carried totals). For any order that forms a sum as a tree of additions of depth d, the
rounding error is at most about d * eps * (sum of |terms|), where eps is the dtype's machine
epsilon. The sharded op's depth is that of the local scan (XLA's cumsum on CPU behaves like a
tree: its measured error grows like log2 of the length), plus one addition per carried block,
plus the final one. `error_bound` uses depth log2(length) + devices + 2, per element, scaled by
the partial sums of |x| up to it.

For float64 inputs the NumPy oracle rounds too (sequentially); at the lengths the float64
tests use (512) its own error is a small part of the bound.
"""

import math

import jax.numpy as jnp
import numpy as np
from jax import lax
from shared.worst import Worst

__all__ = [
    "WORST",
    "assert_within",
    "error_bound",
    "prefix_sum_f64",
    "prefix_sum_reference",
    "suffix_sum_f64",
    "suffix_sum_reference",
]


def prefix_sum_reference(x):
    return jnp.cumsum(x, axis=1)


def suffix_sum_reference(x):
    return lax.cumsum(x, axis=1, reverse=True)


def prefix_sum_f64(x):
    return np.cumsum(np.asarray(x, np.float64), axis=1)


def suffix_sum_f64(x):
    return np.cumsum(np.asarray(x, np.float64)[:, ::-1], axis=1)[:, ::-1]


def error_bound(x, dtype, *, reverse=False, devices=8):
    """Largest error, per element, allowed in a prefix (or suffix) sum of x computed in dtype.

    d * eps * (partial sums of |x|) with d = ceil(log2(length)) + devices + 2: see the module
    docstring. A sequential float32 cumsum of a million uniform(0, 1) numbers misses this
    bound (its error grows with the length itself); the tree-like orders used here do not.
    """
    magnitude = np.abs(np.asarray(x, np.float64))
    partial_sums = suffix_sum_f64(magnitude) if reverse else prefix_sum_f64(magnitude)
    depth = math.ceil(math.log2(max(magnitude.shape[1], 2))) + devices + 2
    return depth * np.finfo(dtype).eps * partial_sums


# The worst fraction of its bound any comparison used: conftest.py prints it after the run.
WORST = Worst("prefix_sum")


def assert_within(got, want, bound):
    """|got - want| <= bound elementwise (want and bound in float64), with the same shape and
    the same non-finite entries."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    assert np.array_equal(np.isfinite(got), np.isfinite(want)), "NaN/inf where the oracle has none"
    finite = np.isfinite(want)
    error = np.abs(got - want)[finite]
    bound = np.maximum(np.broadcast_to(bound, want.shape)[finite], np.finfo(np.float64).tiny)
    if error.size == 0:
        return
    ratio = error / bound
    fraction = float(np.max(ratio))
    WORST.record(fraction)
    worst = int(np.argmax(ratio))
    assert fraction <= 1.0, (
        f"error {error[worst]:.3e} exceeds the bound {bound[worst]:.3e}: "
        f"got {got[finite][worst]!r}, want {want[finite][worst]!r}"
    )
