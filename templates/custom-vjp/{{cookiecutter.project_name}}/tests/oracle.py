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


def distances_f64(x, y):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    diff = x[:, None, :] - y[None, :, :]
    return np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))


def distances_vjp_f64(x, y, cotangent):
    """Gradient of sum(cotangent * d) with respect to x and y.

    Where x_i == y_j the pair contributes 0 (the minimum-norm subgradient).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    diff = x[:, None, :] - y[None, :, :]
    d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(d == 0, 0.0, np.asarray(cotangent, np.float64) / d)
    weighted = weight[:, :, None] * diff
    return weighted.sum(axis=1), -weighted.sum(axis=0)


def distances_jvp_f64(x, y, x_dot, y_dot):
    """Directional derivative of d along (x_dot, y_dot); 0 where x_i == y_j."""
    x, y, x_dot, y_dot = (np.asarray(a, dtype=np.float64) for a in (x, y, x_dot, y_dot))
    diff = x[:, None, :] - y[None, :, :]
    d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    inner = np.einsum("ijk,ijk->ij", diff, x_dot[:, None, :] - y_dot[None, :, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d == 0, 0.0, inner / d)


def distances_hessian_f64(x, y, weights):
    """Second derivatives of sum(weights * d) with respect to (x, y), nested
    like jax.jacrev(jax.jacrev(f, (0, 1)), (0, 1)): ((H_xx, H_xy), (H_yx, H_yy)),
    H_xy of shape (n, features, m, features).

    A pair with u = x_i - y_j != 0 contributes w_ij (I - u u^T / |u|^2) / |u|
    at (x_i, x_i) and (y_j, y_j), and its negative at (x_i, y_j) and (y_j, x_i).
    Where x_i == y_j it contributes 0 (no second derivative exists there).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    (n, k), m = x.shape, y.shape[0]
    diff = x[:, None, :] - y[None, :, :]
    d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(d[..., None] == 0, 0.0, diff / d[..., None])
        scale = np.where(d == 0, 0.0, np.asarray(weights, np.float64) / d)
    projector = np.eye(k) - unit[..., :, None] * unit[..., None, :]
    pair = scale[..., None, None] * projector  # (n, m, k, k)
    h_xx, h_yy = np.zeros((n, k, n, k)), np.zeros((m, k, m, k))
    h_xx[np.arange(n), :, np.arange(n), :] = pair.sum(axis=1)
    h_yy[np.arange(m), :, np.arange(m), :] = pair.sum(axis=0)
    h_xy = -pair.transpose(0, 2, 1, 3)
    return (h_xx, h_xy), (h_xy.transpose(2, 3, 0, 1), h_yy)
