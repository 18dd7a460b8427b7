"""The plain-JAX reference: the correctness oracle for the partitioned op.

TODO: write your op here in plain JAX, as simply as it can be written. The
conformance cells hold the op to it run in float64, and take its gradient
with JAX's own autodiff as the gradient oracle.
"""

import jax


def {{ cookiecutter.op_name }}_reference(x: jax.Array) -> jax.Array:
    """TODO: your op in plain JAX. Here: each entry squared."""
    return x * x
