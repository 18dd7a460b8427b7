"""The plain-JAX reference: the correctness oracle for the kernel, the
fallback off the kernel's platform, and (backward=reference) its VJP.

TODO: write your op's formula here, in plain JAX. The skeleton's op is the
identity, y = x * 1, computed in float32 and returned in the input dtype.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(x: jax.Array) -> jax.Array:
    """TODO: your op. Here: x (m, n) * 1, in the dtype of x."""
    return (x.astype(jnp.float32) * 1).astype(x.dtype)
