"""The plain-JAX reference: softplus the obvious way, log(1 + exp(x)).

It overflows for large x (exp(89) is inf in float32), which is one reason
for the custom rule; the tests' inputs are standard normal, where it is exact
to a few ulps and its autodiff grades the op's gradients.
"""

import jax
import jax.numpy as jnp


def softplus_reference(x: jax.Array) -> jax.Array:
    """log(1 + exp(x)), elementwise."""
    return jnp.log1p(jnp.exp(x))
