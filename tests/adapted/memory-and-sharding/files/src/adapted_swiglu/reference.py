"""The plain-JAX reference of the block: whole arrays on one device, no
shard_map, no gathers, no checkpointing. sharded_step.py stacks it into the
reference model (reference_loss, reference_step), the correctness oracle of
the sharded step; tests/oracle.py runs that model in float64.
"""

from functools import partial

import jax
import jax.numpy as jnp


def reference_swiglu_block(
    h: jax.Array, w_gate: jax.Array, w_up: jax.Array, w_down: jax.Array
) -> jax.Array:
    """The SwiGLU block's branch: (silu(h @ w_gate) * (h @ w_up)) @ w_down,
    each matmul in float32 (HIGHEST), whatever the platform's default."""
    matmul = partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    return matmul(jax.nn.silu(matmul(h, w_gate)) * matmul(h, w_up), w_down)
