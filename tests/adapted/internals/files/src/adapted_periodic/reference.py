"""The plain-JAX reference: the correctness oracle for the primitive.

It builds the dense periodic tridiagonal matrix and multiplies, differentiated
by JAX's own autodiff: slow (n^2 memory) but obviously right. It shares no
code with periodic_matvec.py.
"""

import jax
import jax.numpy as jnp


def periodic_matvec_reference(
    dl: jax.Array,
    d: jax.Array,
    du: jax.Array,
    x: jax.Array,
) -> jax.Array:
    """The periodic tridiagonal matrix (dl, d, du) times x, along the last
    axis: row i holds dl[i] at column i-1 and du[i] at column i+1, modulo n."""
    n = x.shape[-1]
    eye = jnp.eye(n, dtype=x.dtype)
    # roll(eye, s, axis=1)[i, j] is 1 where j = i + s (mod n).
    matrix = (
        d[..., :, None] * eye
        + dl[..., :, None] * jnp.roll(eye, -1, axis=1)
        + du[..., :, None] * jnp.roll(eye, 1, axis=1)
    )
    return jnp.einsum("...ij,...j->...i", matrix, x, precision=jax.lax.Precision.HIGHEST)
