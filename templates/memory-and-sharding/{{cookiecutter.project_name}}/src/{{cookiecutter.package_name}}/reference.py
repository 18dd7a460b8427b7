{%- set op = cookiecutter.op_name -%}
"""The plain-JAX reference of the block: whole arrays on one device, no
shard_map, no gathers, no checkpointing. sharded_step.py stacks it into the
reference model (reference_loss, reference_step), the correctness oracle of
the sharded step; tests/oracle.py runs that model in float64.
{%- if cookiecutter.example == "none" %}

TODO: your block's branch, the same formula as {{ op }}.py's on whole arrays.
{%- endif %}
"""

import jax
{%- if cookiecutter.example != "none" %}
import jax.numpy as jnp
{%- endif %}

from .{{ op }} import matmul  # float32 matmuls at MATMUL_PRECISION (HIGHEST)


def reference_{{ op }}(h: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
    """The block's branch: the model is ``h <- h + branch(h, *weights)``, block
    by block, on h (batch, d)."""
{%- if cookiecutter.example != "none" %}
    return matmul(jnp.tanh(matmul(h, w_in)), w_out)
{%- else %}
    return matmul(matmul(h, w_in), w_out)  # TODO: your block's branch
{%- endif %}
