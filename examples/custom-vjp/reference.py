"""Oracles for the DEQ layer, deliberately written without any custom derivative.

1. `deq_layer_unrolled`: plain JAX. Runs a fixed number of iterations with `lax.fori_loop`
   (static bounds, so JAX lowers it to a scan that reverse mode can differentiate) and lets
   ordinary autodiff differentiate every step. Correct once the iteration has converged, but
   reverse mode stores every iterate: memory grows linearly with `num_iter`.
2. `numpy_deq_solution` / `numpy_deq_grads`: float64 NumPy, independent of JAX entirely. The
   solution by iterating to convergence; the gradients by solving the implicit-function-theorem
   linear system with `np.linalg.solve`. Used to check oracle 1 and the custom VJP.
"""

import jax
import jax.numpy as jnp
import numpy as np
from deq import DEQParams, cell
from jax import lax

__all__ = ["deq_layer_unrolled", "numpy_deq_grads", "numpy_deq_solution"]


def unrolled_fixed_point(f, params, x, z0, num_iter: int):
    """Exactly num_iter applications of z <- f(params, x, z); no convergence test."""
    return lax.fori_loop(0, num_iter, lambda _, z: f(params, x, z), z0)


def deq_layer_unrolled(params: DEQParams, x, num_iter: int):
    """Same layer as `deq.deq_layer`, solved by `num_iter` unrolled steps per example."""
    z0 = jnp.zeros((x.shape[0], params.W.shape[0]), dtype=x.dtype)

    def solve_one(x_i, z0_i):
        return unrolled_fixed_point(cell, params, x_i, z0_i, num_iter)

    return jax.vmap(solve_one)(x, z0)


def _as_float64(params, x):
    W, U, b = (np.asarray(a, dtype=np.float64) for a in params)
    return W, U, b, np.asarray(x, dtype=np.float64)


def numpy_deq_solution(params, x, *, tol=1e-14, max_iter=100_000):
    """float64 fixed point of every example at once; raises if it does not converge."""
    W, U, b, x = _as_float64(params, x)
    z = np.zeros((x.shape[0], W.shape[0]))
    drive = x @ U.T + b
    for _ in range(max_iter):
        z_next = np.tanh(z @ W.T + drive)
        if np.max(np.abs(z_next - z)) <= tol:
            return z_next
        z = z_next
    raise RuntimeError("NumPy reference iteration did not converge")


def numpy_deq_grads(params, x, cotangent):
    """float64 gradients of sum(cotangent * z*) w.r.t. (W, U, b, x) via the IFT.

    Per example, with z* = tanh(a), a = W z* + U x + b and D = diag(1 - z*^2):
    dz* = D (dW z* + W dz* + dU x + U dx + db), i.e. (I - D W) dz* = D (dW z* + dU x + U dx + db).
    The adjoint u solves (I - D W)^T u = cotangent; with s = D u the gradients are
    dW = s z*^T, dU = s x^T, db = s (summed over the batch) and dx = U^T s (per example).
    """
    W, U, _b, x = _as_float64(params, x)
    cotangent = np.asarray(cotangent, dtype=np.float64)
    z = numpy_deq_solution(params, x)
    eye = np.eye(W.shape[0])
    s = np.empty_like(z)
    for i in range(x.shape[0]):
        d = 1.0 - z[i] ** 2
        u = np.linalg.solve((eye - d[:, None] * W).T, cotangent[i])
        s[i] = d * u
    return DEQParams(W=s.T @ z, U=s.T @ x, b=s.sum(axis=0)), s @ U
