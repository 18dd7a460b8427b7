"""The plain-JAX reference: the correctness oracle for the FFI handler.

    y = scale * x / sqrt(mean(x**2) + eps)    over the last axis

It is the obvious formula, differentiated by JAX's own autodiff. Keep it
independent of scaled_norm.py (no shared helpers), so a bug in one cannot
hide in the other. bfloat16 is computed in float32 and rounded once at the
end, like the handler.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def scaled_norm_reference(x: ArrayLike, eps: float = 1e-6, scale: float = 2.0) -> jax.Array:
    """scale * x / sqrt(mean(x**2) + eps) over the last axis of x."""
    x = jnp.asarray(x)
    compute = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
    xc = x.astype(compute)
    mean_square = jnp.mean(xc * xc, axis=-1, keepdims=True)
    return (scale * xc * jax.lax.rsqrt(mean_square + eps)).astype(x.dtype)
