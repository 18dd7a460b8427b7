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


def tridiagonal_matvec_f64(dl, d, du, x):
    """The product in float64 NumPy, row by row of the band: an oracle that
    shares no code, and no dtype, with the op or the reference."""
    dl, d, du, x = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x))
    y = d * x
    y[..., 1:] += dl[..., 1:] * x[..., :-1]
    y[..., :-1] += du[..., :-1] * x[..., 1:]
    return y


def tridiagonal_matvec_vjp_f64(dl, d, du, x, cotangent):
    """Gradients of sum(cotangent * y) with respect to (dl, d, du, x)."""
    dl, d, du, x, ct = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x, cotangent))
    g_dl, g_du = np.zeros_like(ct), np.zeros_like(ct)
    g_dl[..., 1:] = ct[..., 1:] * x[..., :-1]
    g_du[..., :-1] = ct[..., :-1] * x[..., 1:]
    g_x = d * ct
    g_x[..., :-1] += dl[..., 1:] * ct[..., 1:]
    g_x[..., 1:] += du[..., :-1] * ct[..., :-1]
    return g_dl, ct * x, g_du, g_x
