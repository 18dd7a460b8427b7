"""Independent float64 NumPy oracle, and the comparison every test uses.

assert_close records the worst error it has seen; conftest.py prints it at the
end of the run, so you can see how close the tests came to their tolerances.
"""

import os

import numpy as np

# Relative tolerance per dtype, a few units of its machine epsilon (float32:
# 8 eps, bfloat16: 1.3 eps), applied to each element as
# |got - want| <= rtol * (|want| + max|want|): relative to the element and to
# the array's scale, which suits sums of many terms. Gradients get 10x.
RTOL = {"float64": 1e-12, "float32": 1e-6, "bfloat16": 1e-2, "float16": 2e-3}

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


def rms_norm_f64(x, eps=1e-6):
    """x / sqrt(mean(x**2) + eps) over the last axis, in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rms_norm_vjp_f64(x, cotangent, eps=1e-6):
    """Gradient of sum(cotangent * rms_norm(x)) with respect to x, in float64.

    With r = 1 / sqrt(mean(x**2) + eps) per row and n the row length:
    dx = r * g - r**3 * mean(g * x) * x.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(cotangent, dtype=np.float64)
    r = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return r * g - r**3 * np.mean(g * x, axis=-1, keepdims=True) * x
