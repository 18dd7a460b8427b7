"""The plain-JAX reference: the correctness oracle for the sharded op.

On a sharded input XLA cannot partition lax.top_k: it all-gathers the whole
array onto every device first. The results are right, which is what makes it
the oracle; the tests check it against float64 NumPy.
"""

import jax
import jax.numpy as jnp

SOFTMAX = {{ "True" if cookiecutter.normalize == "softmax" else "False" }}


def {{ cookiecutter.op_name }}_reference(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """The k largest entries of each row of x (batch, items), largest first.

    Returns (values, indices), each (batch, k); ties go to the lower index.{% if cookiecutter.normalize == "softmax" %}
    Values are softmax probabilities over the whole row.{% endif %}
    """
    values, indices = jax.lax.top_k(x, k)
    if SOFTMAX:
        values = jnp.exp(values - jax.nn.logsumexp(x, axis=-1, keepdims=True))
    return values, indices
