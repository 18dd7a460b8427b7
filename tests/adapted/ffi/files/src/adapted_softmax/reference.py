"""The plain-JAX reference: the correctness oracle for the FFI handler.

    y = exp(x - max(x)) / sum(exp(x - max(x)))    over the last axis

The row maximum is subtracted under stop_gradient (a shift that cancels),
so exp never overflows; bfloat16 is computed in float32 and rounded once at
the end, like the handler.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def softmax_reference(x: ArrayLike) -> jax.Array:
    """softmax over the last axis of x."""
    x = jnp.asarray(x)
    compute = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
    xc = x.astype(compute)
    e = jnp.exp(xc - jax.lax.stop_gradient(jnp.max(xc, axis=-1, keepdims=True)))
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)
