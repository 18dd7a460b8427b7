"""The plain-JAX reference: the correctness oracle for the FFI handler.

    y = x * sigmoid(x)    element by element

jax.nn.sigmoid, differentiated by JAX's own autodiff; bfloat16 is computed
in float32 and rounded once at the end, like the handler.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def silu_reference(x: ArrayLike) -> jax.Array:
    """x * sigmoid(x), element by element."""
    x = jnp.asarray(x)
    compute = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
    xc = x.astype(compute)
    return (xc * jax.nn.sigmoid(xc)).astype(x.dtype)
