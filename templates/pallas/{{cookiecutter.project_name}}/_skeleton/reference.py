"""The plain-JAX reference: the correctness oracle for the kernel, the
fallback off the kernel's platform, and (backward=reference) its VJP.

TODO: write your op's formula here, in plain JAX. The skeleton's op is the
identity, y = x * 1, computed in float32 (or in the input dtype where wider:
float64, the oracle's) and returned in the input dtype. Give every matmul
precision=jax.lax.Precision.HIGHEST and
preferred_element_type=jnp.promote_types(x.dtype, jnp.float32): the
platform's default float32 matmul on NVIDIA GPUs is TensorFloat-32, and no GPU
library has a float64 x float64 -> float32 matmul.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(x: jax.Array) -> jax.Array:
    """TODO: your op. Here: x (m, n) * 1, in the dtype of x."""
    accumulator = jnp.promote_types(x.dtype, jnp.float32)
    return (x.astype(accumulator) * 1).astype(x.dtype)
