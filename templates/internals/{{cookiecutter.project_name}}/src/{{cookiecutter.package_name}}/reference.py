"""The plain-JAX reference: the correctness oracle for the primitive.

It builds the dense matrix and multiplies, differentiated by JAX's own
autodiff: slow (n^2 memory) but obviously right. Keep it independent of
{{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one cannot hide in the
other. The tests check it against float64 NumPy.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(
    dl: jax.Array,
    d: jax.Array,
    du: jax.Array,
    x: jax.Array,
) -> jax.Array:
    """The tridiagonal matrix (dl, d, du) times x, along the last axis; the
    first entry of dl and the last of du are ignored."""
    n = x.shape[-1]
    matrix = (
        d[..., :, None] * jnp.eye(n, dtype=x.dtype)
        + dl[..., :, None] * jnp.eye(n, k=-1, dtype=x.dtype)
        + du[..., :, None] * jnp.eye(n, k=1, dtype=x.dtype)
    )
    # HIGHEST: float32 in, float32 products, on every platform (XLA's default
    # on NVIDIA GPUs is TensorFloat-32, about 1e4 float32 ulps off).
    return jnp.einsum("...ij,...j->...i", matrix, x, precision=jax.lax.Precision.HIGHEST)
