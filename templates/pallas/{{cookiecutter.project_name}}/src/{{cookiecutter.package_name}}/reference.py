"""The plain-JAX reference: the correctness oracle for the kernel.

gelu(a @ b + bias), accumulated in float32 whatever the input dtype, returned
in the input dtype. XLA fuses this well already: write a kernel only when a
profile shows this is your bottleneck and XLA's fusion is the problem.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(a: jax.Array, b: jax.Array, bias: jax.Array) -> jax.Array:
    """a (m, k) @ b (k, n) + bias (n,), then GELU (tanh approximation)."""
    z = jnp.dot(a, b, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    return jax.nn.gelu(z, approximate=True).astype(a.dtype)
