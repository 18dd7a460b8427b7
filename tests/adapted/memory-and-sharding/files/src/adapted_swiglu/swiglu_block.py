"""A SwiGLU block, as each device computes it inside the step's shard_map:
the branch (silu(h @ w_gate) * (h @ w_up)) @ w_down of the residual
h <- h + block(h)."""

from functools import partial

import jax
import jax.numpy as jnp

# The gate and up projections (d, f), the down projection (f, d).
WEIGHTS = {"w_gate": ("d", "f"), "w_up": ("d", "f"), "w_down": ("f", "d")}
# FSDP over d; Megatron over f: gate and up by columns, down by rows.
SPLIT = {"d": "data", "f": "model"}


def swiglu_block(h: jax.Array, w_gate: jax.Array, w_up: jax.Array, w_down: jax.Array) -> jax.Array:
    """One device's share: gate and up are elementwise over this device's
    slice of f, and the down projection's partial sum over it is what the
    step sums over "model"."""
    matmul = partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    gate = matmul(h, w_gate)
    return matmul(gate * jax.nn.sigmoid(gate) * matmul(h, w_up), w_down)
