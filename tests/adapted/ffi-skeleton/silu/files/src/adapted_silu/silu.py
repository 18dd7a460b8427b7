"""SiLU, x * sigmoid(x) element by element, computed by C++ XLA FFI handlers.

The handlers' rows are csrc/silu_kernels.h; rowwise.py registers them with
XLA, calls them and pairs them in a jax.custom_vjp so that grad works. The
handlers take no attributes, and need no residual (it is 0).
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def silu(x: ArrayLike) -> jax.Array:
    """x * sigmoid(x), element by element, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, a last axis of length >= 1.
    Differentiable (reverse mode), works under jit and vmap. A sharded x is
    computed shard by shard, whichever axes are split, with no
    communication, gradient included, and the result is sharded like x.
    """
    return _silu(jnp.asarray(x))


def _derivative(x: jax.Array) -> jax.Array:
    """d silu / dx = s * (1 + x * (1 - s)), s = sigmoid(x), in float32 at least."""
    xc = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    s = jax.nn.sigmoid(xc)
    return s * (1 + xc * (1 - s))


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(x: jax.Array, residual: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: g * silu'(x)."""
    del residual
    d = _derivative(x)
    return (cotangent.astype(d.dtype) * d).astype(x.dtype)


def _forward_tangents(
    x: jax.Array, residual: jax.Array, t: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The tangents of (y, residual): y's is the backward formula with t as
    the cotangent (the Jacobian is diagonal); the residual is always 0."""
    return _backward_formula(x, residual, t), jnp.zeros_like(residual)


_silu = rowwise.differentiable(_backward_formula, _forward_tangents)
