"""Softmax over the last axis, computed by C++ XLA FFI handlers.

    y = exp(x - max(x)) / sum(exp(x - max(x)))

The handlers' rows are csrc/softmax_kernels.h; rowwise.py registers them
with XLA, calls them and pairs them in a jax.custom_vjp so that grad works.
The handlers take no attributes.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def softmax(x: ArrayLike) -> jax.Array:
    """softmax over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. Differentiable (reverse mode), works
    under jit and vmap. An x whose leading axes are sharded is computed shard
    by shard, with no communication, gradient included; a sharded last axis
    is gathered first (each row must be whole on one device).
    """
    return _softmax(jnp.asarray(x))


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(x: jax.Array, m: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: y * (g - sum(g * y)), y = softmax(x)
    from m, the maximum per row. y does not depend on m (a shift that
    cancels), hence its stop_gradient."""
    r = jax.lax.stop_gradient(m)[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    e = jnp.exp(xc - r)
    y = e / jnp.sum(e, axis=-1, keepdims=True)
    return (y * (gc - jnp.sum(gc * y, axis=-1, keepdims=True))).astype(x.dtype)


def _forward_tangents(x: jax.Array, m: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The tangents of (y, m): the y tangent is the backward formula with t as
    the cotangent (the Jacobian of softmax is symmetric). m only shifts what
    the backward computes, which cancels: its tangent is taken as 0."""
    return _backward_formula(x, m, t), jnp.zeros_like(m)


_softmax = rowwise.differentiable(_backward_formula, _forward_tangents)
