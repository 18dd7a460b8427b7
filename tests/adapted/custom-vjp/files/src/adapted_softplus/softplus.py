"""Softplus, log(1 + exp(x)), with a custom VJP.

The primal is the stable form max(x, 0) + log1p(exp(-|x|)), finite for every
finite x; its autodiff would go through max and abs (a subgradient at 0) and
exp. The rule states the derivative directly: the logistic sigmoid of x,
which JAX computes stably, and it saves x alone as the residual.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def softplus(x: ArrayLike) -> jax.Array:
    """log(1 + exp(x)), elementwise, for a real floating-point array."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"softplus: x must be a real floating-point array, got {x.dtype}")
    return _softplus(x)


@jax.custom_vjp
def _softplus(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, 0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _fwd(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return _softplus(x), x


def _bwd(x: jax.Array, cotangent: jax.Array) -> tuple[jax.Array]:
    # Elementwise: the cotangent varies over the same shard_map axes as x.
    return (cotangent * jax.nn.sigmoid(x),)


_softplus.defvjp(_fwd, _bwd)
