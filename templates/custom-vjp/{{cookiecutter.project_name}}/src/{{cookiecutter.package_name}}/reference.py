"""The plain-JAX reference: the correctness oracle for the custom rule.

It is the obvious formula, differentiated by JAX's own autodiff. Keep it
independent of pairwise_distances.py (no shared helpers), so a bug in one cannot
hide in the other. The tests check it against float64 NumPy.

Its gradient is NaN wherever two points coincide: that is the bug the custom
rule fixes, so only compare gradients with it at points that do not coincide.
"""

import jax
import jax.numpy as jnp


def pairwise_distances_reference(x: jax.Array, y: jax.Array) -> jax.Array:
    """Euclidean distances between the rows of x (n, d) and y (m, d), shape (n, m)."""
    diff = x[:, None, :] - y[None, :, :]
    return jnp.sqrt(jnp.sum(diff * diff, axis=-1))
