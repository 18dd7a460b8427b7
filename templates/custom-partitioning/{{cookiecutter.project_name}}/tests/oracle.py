"""Independent float64 NumPy top-k, and the comparison every test uses.

assert_close records the worst error it has seen; conftest.py prints it at the
end of the run, so you can see how close the tests came to their tolerances.
"""

import os

import numpy as np

# Relative tolerance per dtype, a few units of its machine epsilon (float32:
# 8 eps), applied to each element as
# |got - want| <= rtol * (|want| + max|want|): relative to the element and to
# the array's scale, which suits sums of many terms.
RTOL = {"float64": 1e-12, "float32": 1e-6}

WORST = {"error": 0.0, "fraction": 0.0, "test": ""}


def rtol_for(dtype) -> float:
    return RTOL[np.dtype(dtype).name]


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


def assert_close(got, want, rtol):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    assert np.all(np.isfinite(got) == np.isfinite(want)), "NaN/inf where the oracle has none"
    if want.size == 0:
        return
    finite = np.isfinite(want)
    error = np.abs(got - want)[finite]
    tolerance = rtol * (np.abs(want[finite]) + np.max(np.abs(want[finite]), initial=0.0))
    tolerance = np.maximum(tolerance, np.finfo(np.float64).tiny)
    fraction = float(np.max(error / tolerance, initial=0.0))
    if fraction > WORST["fraction"] or not WORST["test"]:
        WORST.update(
            error=float(np.max(error, initial=0.0)),
            fraction=fraction,
            test=os.environ.get("PYTEST_CURRENT_TEST", "? ").rsplit(" ", 1)[0],
        )
    worst = int(np.argmax(error / tolerance)) if error.size else 0
    assert fraction <= 1.0, (
        f"max error {np.max(error):.3e} exceeds tolerance (rtol={rtol:g}): "
        f"got {got[finite].ravel()[worst]!r}, want {want[finite].ravel()[worst]!r}"
    )


SOFTMAX = {{ "True" if cookiecutter.normalize == "softmax" else "False" }}


def top_k_f64(x, k):
    """Values and indices of the k largest entries per row, in float64.

    A stable sort on -x keeps equal values in index order, like lax.top_k.
    """
    x = np.asarray(x, np.float64)
    indices = np.argsort(-x, axis=1, kind="stable")[:, :k]
    values = np.take_along_axis(x, indices, axis=1)
    if SOFTMAX:
        row_max = x.max(axis=1, keepdims=True)
        lse = row_max + np.log(np.exp(x - row_max).sum(axis=1, keepdims=True))
        values = np.exp(values - lse)
    return values, indices


def quantized_with_ties(rng, shape, dtype="float32"):
    """Inputs full of ties, within every shard and across all of them.

    Every entry is 0, 1 or 2, so a row's largest value occurs in every shard
    and the top k is decided by the lower-index rule alone. Every other row
    also holds a 3 at both sides of an item-shard boundary for 2, 4 and 8
    equal shards: up to six tied winners, each pair split between two shards.
    """
    x = rng.integers(0, 3, shape).astype(dtype)
    items = shape[1]
    for row in x[::2]:
        for shards in (2, 4, 8):
            boundary = items // shards * rng.integers(1, shards)
            row[boundary - 1 : boundary + 1] = 3
    return x


def top_k_vjp_f64(x, k, cotangent):
    """Gradient of sum(cotangent * values) with respect to x."""
    x = np.asarray(x, np.float64)
    values, indices = top_k_f64(x, k)
    cotangent = np.asarray(cotangent, np.float64)
    grad = np.zeros_like(x)
    rows = np.arange(x.shape[0])[:, None]
    if not SOFTMAX:
        np.add.at(grad, (rows, indices), cotangent)
        return grad
    # values_j = p[i_j]; d p_a / d x_b = p_a (delta_ab - p_b)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    weighted = cotangent * values
    np.add.at(grad, (rows, indices), weighted)
    return grad - p * weighted.sum(axis=1, keepdims=True)
