{%- if cookiecutter.example == "rms_norm" -%}
"""The plain-JAX reference: the correctness oracle for the FFI handler.

    y = x / sqrt(mean(x**2, axis=-1) + eps)

It is the obvious formula, differentiated by JAX's own autodiff. Keep it
independent of {{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one cannot hide in
the other. tests/test_reference.py checks it against float64 NumPy.

Write it as a division by sqrt, not as `x * lax.rsqrt(...)`: XLA:CPU in
jaxlib 0.11.1 to 0.12.1 miscompiles jit(grad) of the rsqrt form for 4096 rows
or more (wrong gradients, no error). The test at 4096 rows guards this.
bfloat16 is computed in float32 and rounded once at the end, like the handler.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def {{ cookiecutter.op_name }}_reference(x: ArrayLike, eps: float = 1e-6) -> jax.Array:
    """x / sqrt(mean(x**2) + eps) over the last axis of x."""
    x = jnp.asarray(x)
    compute = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
    xc = x.astype(compute)
    mean_square = jnp.mean(xc * xc, axis=-1, keepdims=True)
    return (xc / jnp.sqrt(mean_square + eps)).astype(x.dtype)
{%- else -%}
"""The plain-JAX reference: the correctness oracle for the FFI handler.

It is the obvious formula, differentiated by JAX's own autodiff. Keep it
independent of {{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one cannot hide in
the other. bfloat16 is computed in float32 and rounded once at the end, like
the handler.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def {{ cookiecutter.op_name }}_reference(x: ArrayLike, eps: float = 1e-6) -> jax.Array:
    """TODO: your op's formula over the last axis of x (the starter: the identity)."""
    del eps
    x = jnp.asarray(x)
    compute = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
    return (x.astype(compute) * 1).astype(x.dtype)
{%- endif %}
