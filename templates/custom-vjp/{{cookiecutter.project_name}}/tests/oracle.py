"""The example's float64 NumPy derivatives, for the example's own tests (the
values' oracle and the tolerances are in tests/op_spec.py). Optional: delete it
with those tests when you adapt the starter to your own op."""

import numpy as np

from compare import Ulps

# The second derivatives' tolerance (those of values and gradients are in
# tests/op_spec.py). They sum one projector per pair, the way gradients sum
# their terms: measured at most 4.7 ulps of the largest entry (float32); 8.
HESSIANS = Ulps(at_value=0, at_scale=8)


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


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
