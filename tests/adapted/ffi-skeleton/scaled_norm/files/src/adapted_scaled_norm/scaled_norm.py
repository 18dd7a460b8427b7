"""Scaled RMS normalisation over the last axis, computed by C++ XLA FFI handlers.

    y = scale * x / sqrt(mean(x**2, axis=-1) + eps)

The handlers' rows are csrc/scaled_norm_kernels.h; rowwise.py registers them
with XLA, calls them and pairs them in a jax.custom_vjp so that grad works.
Both handlers take the two attributes, eps and scale.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def scaled_norm(x: ArrayLike, eps: float = 1e-6, scale: float = 2.0) -> jax.Array:
    """scale * x / sqrt(mean(x**2) + eps) over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. eps, scale: Python numbers (attributes
    of the compiled call, so they cannot be traced). Differentiable (reverse
    mode), works under jit and vmap; a sharded last axis is gathered first.
    """
    x = jnp.asarray(x)
    try:
        eps, scale = float(eps), float(scale)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(
            "scaled_norm: eps and scale must be Python numbers; they are compile-time "
            "attributes of the FFI call and cannot be traced values"
        ) from err
    return _scaled_norm(x, eps=eps, scale=scale)


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(
    x: jax.Array, rinv: jax.Array, cotangent: jax.Array, eps: float, scale: float
) -> jax.Array:
    """What the backward handler computes: scale * r * (g - r**2 * mean(g * x) * x)
    per row, from rinv = 1/rms (which holds what it needs of eps)."""
    del eps
    r = rinv[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    k = r**2 * jnp.mean(gc * xc, axis=-1, keepdims=True)
    return (scale * r * (gc - k * xc)).astype(x.dtype)


def _forward_tangents(
    x: jax.Array, rinv: jax.Array, t: jax.Array, eps: float, scale: float
) -> tuple[jax.Array, jax.Array]:
    """The tangents of (y, rinv) for a tangent t of x."""
    # d(1/rms) = -(1/rms)**3 * mean(x * t); the y tangent is the backward
    # formula with t as the cotangent (the Jacobian of y is symmetric).
    r = rinv[..., None]
    rinv_t = -(r**3) * jnp.mean(x.astype(r.dtype) * t.astype(r.dtype), axis=-1, keepdims=True)
    return _backward_formula(x, rinv, t, eps, scale), rinv_t[..., 0]


_scaled_norm = rowwise.differentiable(_backward_formula, _forward_tangents)
