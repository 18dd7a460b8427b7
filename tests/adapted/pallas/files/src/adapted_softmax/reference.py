"""The plain-JAX reference: the correctness oracle for the kernel.

Softmax over the last axis, computed in float32 whatever the input dtype and
returned in the input dtype.
"""

import jax
import jax.numpy as jnp


def softmax_reference(x: jax.Array) -> jax.Array:
    """exp(x) / sum(exp(x)) along each row of x (m, n)."""
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)
