"""The plain-JAX reference: the correctness oracle for the sharded op.

On an items-sharded input XLA partitions jax.nn.logsumexp with all-reduces of
the row maximum and sum (the same as the rule's); its gradient needs them
again. The results are right, which is what makes it the oracle.
"""

import jax


def logsumexp_reference(x: jax.Array) -> jax.Array:
    """log(sum(exp(x))) over the last axis of x (batch, items): one number per row."""
    return jax.nn.logsumexp(x, axis=-1)
