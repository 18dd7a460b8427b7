"""Independent float64 NumPy oracle, and the comparison every test uses.

assert_close records the worst error it has seen; conftest.py prints it at the
end of the run, so you can see how close the tests came to their tolerances.
"""

import math
import os

import numpy as np

# Relative tolerance per dtype, a few units of its machine epsilon (float32:
# 8 eps, bfloat16: 1.3 eps; sums of k products need a little more), applied to each element as
# |got - want| <= rtol * (|want| + max|want|): relative to the element and to
# the array's scale, which suits sums of many terms. Gradients get the same: the
# backward is matmuls of the same size, and the tests' worst errors stay under
# 30% of these (conftest.py prints the worst).
RTOL = {"float64": 1e-12, "float32": 2e-6, "bfloat16": 1e-2}

WORST = {"error": 0.0, "fraction": 0.0, "test": ""}


def rtol_for(dtype) -> float:
    return RTOL[np.dtype(dtype).name]


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


# GELU's tanh form, the one the reference uses (jax.nn.gelu(approximate=True)):
# gelu(z) = z/2 * (1 + tanh(u)), u = sqrt(2/pi) * (z + 0.044715 z^3).
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_CUBIC = 0.044715


def _f64(*arrays):
    return (np.asarray(v, np.float64) for v in arrays)


def fused_matmul_f64(a, b, bias):
    """gelu(a @ b + bias) in float64."""
    a, b, bias = _f64(a, b, bias)
    z = a @ b + bias
    return 0.5 * z * (1 + np.tanh(_SQRT_2_OVER_PI * (z + _CUBIC * z**3)))


def fused_matmul_vjp_f64(a, b, bias, g):
    """The cotangents (da, db, dbias) of fused_matmul for the output cotangent g,
    derived by hand in float64: no JAX autodiff, so it can judge a backward that
    is itself JAX's autodiff of the reference."""
    a, b, bias, g = _f64(a, b, bias, g)
    z = a @ b + bias
    t = np.tanh(_SQRT_2_OVER_PI * (z + _CUBIC * z**3))
    # d gelu / dz = (1 + t)/2 + z/2 * (1 - t^2) * du/dz
    slope = 0.5 * (1 + t) + 0.5 * z * (1 - t**2) * _SQRT_2_OVER_PI * (1 + 3 * _CUBIC * z**2)
    dz = g * slope
    return dz @ b.T, a.T @ dz, dz.sum(axis=0)
