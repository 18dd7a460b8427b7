"""The plain-JAX reference: the correctness oracle for the kernel.

gelu(a @ b + bias), accumulated in float32 (or in the input dtype where wider:
float64, the oracle's) and returned in the input dtype. The matmul asks for
Precision.HIGHEST: left to the platform, XLA multiplies float32 on NVIDIA GPUs
as TensorFloat-32 (10-bit significands), and the oracle would be the least
accurate thing in the tests. XLA fuses this well already: write a kernel only when a
profile shows this is your bottleneck and XLA's fusion is the problem.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(a: jax.Array, b: jax.Array, bias: jax.Array) -> jax.Array:
    """a (m, k) @ b (k, n) + bias (n,), then GELU (tanh approximation)."""
    # float32 for float32 and bfloat16, float64 for float64: a float64 x float64
    # -> float32 matmul is one no GPU library has (cuBLASLt refuses it).
    accumulator = jnp.promote_types(a.dtype, jnp.float32)
    z = jnp.dot(
        a, b, precision=jax.lax.Precision.HIGHEST, preferred_element_type=accumulator
    ) + bias.astype(accumulator)
    return jax.nn.gelu(z, approximate=True).astype(a.dtype)
