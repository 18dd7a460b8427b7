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
    return gelu(z).astype(a.dtype)


# Past |z| = 8, tanh(u) below is +-1 in float64 as well; clamping there keeps
# the cube from overflowing (float32 past |z| ~ 2e12), which makes the gradient
# of jax.nn.gelu(approximate=True) 0 * inf = NaN where the true one is 0 or 1.
GELU_FLAT = 8.0


def gelu(z: jax.Array) -> jax.Array:
    """GELU, tanh approximation: z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    # lax.clamp, not jnp.clip: jnp.clip's gradient (through minimum and
    # maximum) loses the mesh under vmap of an explicitly split axis on JAX
    # 0.12 ("Resource axis: x ... is not found in mesh").
    flat = jnp.asarray(GELU_FLAT, z.dtype)
    w = jax.lax.clamp(-flat, z, flat)
    u = jnp.sqrt(2 / jnp.pi).astype(z.dtype) * (w + 0.044715 * w * w * w)
    return 0.5 * z * (1 + jnp.tanh(u))
