"""The plain-JAX reference: the correctness oracle for the sharded step.

One device, no shard_map, no checkpointing, no donation: the textbook loss
and update. The tests check it against a float64 NumPy forward and a
hand-written backward, then hold the sharded step to it.
"""

import jax
import jax.numpy as jnp

# One (w_in, w_out) pair per residual block: w_in (d, f), w_out (f, d).
type Params = list[tuple[jax.Array, jax.Array]]


def reference_loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Half the mean over the batch of the squared error of the residual MLP
    h <- h + tanh(h @ w_in) @ w_out, applied block by block to x (batch, d)."""
    h = x
    for w_in, w_out in params:
        h = h + jnp.tanh(h @ w_in) @ w_out
    return 0.5 * jnp.sum((h - y) ** 2) / x.shape[0]


def reference_step(
    params: Params,
    momentum: Params,
    x: jax.Array,
    y: jax.Array,
    learning_rate: float = 0.05,
    beta: float = 0.9,
) -> tuple[Params, Params, jax.Array]:
    """One SGD-with-momentum step: m <- beta m + g, p <- p - learning_rate m.
    Returns (params, momentum, loss before the step)."""
    loss, grads = jax.value_and_grad(reference_loss)(params, x, y)
    momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - learning_rate * m, params, momentum)
    return params, momentum, loss
