"""A deep-equilibrium (DEQ) layer: the output is the fixed point z* = tanh(W z* + U x + b).

Shapes: W (hidden, hidden), U (hidden, features), b (hidden,), x (batch, features),
z* (batch, hidden). Each example is solved by its own loop (vmap), so one slow example does
not change another's answer, and a non-converged example is NaN on its own.

tanh is 1-Lipschitz, so a spectral norm ||W||_2 < 1 makes the map a contraction in z: the
fixed point exists, is unique, and both the iteration and its adjoint converge.
`init_params` builds W with a chosen spectral norm for that reason.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from fixed_point import fixed_point

__all__ = ["DEQParams", "cell", "deq_layer", "init_params"]


class DEQParams(NamedTuple):
    W: jax.Array  # (hidden, hidden)
    U: jax.Array  # (hidden, features)
    b: jax.Array  # (hidden,)


def init_params(rng: np.random.Generator, hidden, features, *, contraction, dtype):
    """Random parameters with W = contraction * (random orthogonal matrix).

    Every singular value of W is then `contraction`, so ||W||_2 = contraction (< 1 guarantees
    convergence) and, where tanh is not saturated, the iteration really converges at about
    that rate: `contraction` sets how many iterations a problem needs.
    """
    q, r = np.linalg.qr(rng.standard_normal((hidden, hidden)))
    W = contraction * q * np.sign(np.diag(r))  # sign fix: uniformly random orthogonal
    U = rng.standard_normal((hidden, features)) / np.sqrt(features)
    b = 0.1 * rng.standard_normal(hidden)
    return DEQParams(*(jnp.asarray(a, dtype=dtype) for a in (W, U, b)))


def cell(params: DEQParams, x, z):
    """One application of the layer's map for a single example: x (features,), z (hidden,)."""
    return jnp.tanh(params.W @ z + params.U @ x + params.b)


def check_inputs(params, x):
    """Raise TypeError/ValueError unless (params, x) fit the shapes and dtypes above."""
    if not isinstance(params, DEQParams):
        raise TypeError(f"params must be a DEQParams, got {type(params).__name__}")
    for name, a in [("W", params.W), ("U", params.U), ("b", params.b), ("x", x)]:
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(f"{name} must be an array, got {type(a).__name__}")
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(f"{name} must have a floating dtype, got {a.dtype}")
    dtypes = {jnp.dtype(a.dtype) for a in (params.W, params.U, params.b, x)}
    if len(dtypes) != 1:
        got = ", ".join(f"{n}: {a.dtype}" for n, a in zip("WUbx", (*params, x), strict=True))
        raise TypeError(f"W, U, b and x must share one dtype, got {got}")
    W, U, b = params
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be square (hidden, hidden), got shape {W.shape}")
    hidden = W.shape[0]
    if U.ndim != 2 or U.shape[0] != hidden:
        raise ValueError(f"U must have shape ({hidden}, features), got {U.shape}")
    if b.shape != (hidden,):
        raise ValueError(f"b must have shape ({hidden},), got {b.shape}")
    if x.ndim != 2 or x.shape[1] != U.shape[1]:
        raise ValueError(f"x must have shape (batch, {U.shape[1]}), got {x.shape}")


def deq_layer(params: DEQParams, x, *, tol: float, max_iter: int):
    """z* of shape (batch, hidden) for x of shape (batch, features); NaN rows if not converged.

    Reverse-mode differentiable in params and x with memory independent of the iteration
    count. Not forward-mode differentiable (jax.jvp raises TypeError).
    """
    check_inputs(params, x)
    z0 = jnp.zeros((x.shape[0], params.W.shape[0]), dtype=x.dtype)

    def solve_one(x_i, z0_i):
        return fixed_point(cell, params, x_i, z0_i, tol=tol, max_iter=max_iter)

    return jax.vmap(solve_one)(x, z0)
