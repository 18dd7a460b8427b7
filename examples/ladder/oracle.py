"""The float64 NumPy oracle: RMS normalization and its VJP, written out by hand.

    y = x / sqrt(mean(x**2, axis=-1) + eps) * w        x: (rows, d), w: (d,)

With r = 1 / sqrt(mean(x**2) + eps) per row and x_hat = x * r, the VJP for a cotangent dy is

    dw = sum over rows of dy * x_hat
    dx = r * (g - x_hat * mean(g * x_hat))     with g = dy * w   (per row)

Nothing here uses JAX, so no JAX bug (the XLA:CPU miscompilation of jit(grad) of the rsqrt
formulation at >= 4096 rows, for one) can make the oracle agree with a wrong answer.
"""

import numpy as np
from shared.worst import Worst

EPS = 1e-6
# float32 results: |got - want| <= RTOL * (|want| + max|want|), per element. The second term
# scales with the array, as the sums over d (in dx) and over rows (in dw) need.
RTOL = 2e-6
# The worst error/tolerance any check saw, and where (conftest.py prints it after a run).
WORST = Worst("oracle")


def rms_norm(x, w, eps=EPS):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * r * w


def rms_norm_vjp(x, w, dy, eps=EPS):
    """(dx, dw) for the cotangent dy; dw sums over every leading axis of x."""
    x, w, dy = (np.asarray(v, np.float64) for v in (x, w, dy))
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    x_hat = x * r
    g = dy * w
    dx = r * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    dw = np.sum(dy * x_hat, axis=tuple(range(x.ndim - 1)))
    return dx, dw


def error_fraction(got, want, rtol=RTOL):
    """The worst error as a fraction of the tolerance: <= 1 passes."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all(), "NaN or inf in the result"
    tol = rtol * (np.abs(want) + np.abs(want).max()) + np.finfo(np.float64).tiny
    return float(np.max(np.abs(got - want) / tol))


def assert_close(got, want, rtol=RTOL):
    fraction = error_fraction(got, want, rtol)
    WORST.record(fraction)
    assert fraction <= 1.0, f"error is {fraction:.3g} x the tolerance (rtol {rtol:g})"
