{%- set op = cookiecutter.op_name -%}
{%- if cookiecutter.example != "none" -%}
"""The block, as each device computes it inside the step's shard_map: the
branch tanh(h @ w_in) @ w_out of the residual h <- h + block(h).

This file and reference.py are the model's mathematics; sharded_step.py
builds the model (a stack of residual blocks and a squared-error loss), the
mesh, the FSDP gathers, the checkpoint policy and the donating train step
from what is declared here.
"""
{%- else -%}
"""Your block, as each device computes it inside the step's shard_map: the
branch of the residual h <- h + block(h).

TODO: write your block's branch below and in reference.py (the same formula
on whole arrays), declare its weights in WEIGHTS and SPLIT, and its
arguments in tests/op_spec.py. sharded_step.py builds the model, the mesh,
the FSDP gathers, the checkpoint policy and the donating train step from
what is declared here.
"""
{%- endif %}

from functools import partial

import jax
import jax.numpy as jnp

# The precision of every float32 matmul of the block and of its reference
# (reference.py uses it too). Unless a program asks, the platform chooses: on
# NVIDIA GPUs XLA's float32 default is TensorFloat-32 (10-bit mantissa
# products, about 1e4 float32 ulps off), on CPUs full float32. HIGHEST
# computes in float32 everywhere, so the CPU tests check the numbers a GPU
# gives. For speed, choose DEFAULT (TF32 on a GPU) and declare it in
# tests/op_spec.py (OpSpec.matmul_inputs), which widens the tests' tolerance
# on that platform; see the README.
MATMUL_PRECISION = jax.lax.Precision.HIGHEST
matmul = partial(jnp.matmul, precision=MATMUL_PRECISION)

# One block's weights, in the order {{ op }} takes them, each with its axes by
# name: "d" is the width of h (the features of x and y); every other name is a
# hidden size of your choosing.{% if cookiecutter.example == "none" %} TODO: your weights.{% endif %}
WEIGHTS = {"w_in": ("d", "f"), "w_out": ("f", "d")}
# The mesh axis that splits each named axis in storage: "data" is FSDP (each
# device stores 1/n of the weight; the step gathers it whole just before the
# block runs); "model" is Megatron tensor parallelism (parallelism=fsdp-tp; on
# a mesh without a model axis that split is dropped). Name each mesh axis at
# most once per weight.{% if cookiecutter.example == "none" %} TODO: your split.{% endif %}
SPLIT = {"d": "data", "f": "model"}


def {{ op }}(h: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
    """One device's share of the block: `h` is its rows of the batch, with all
    d features; each weight arrives gathered over "data". With a "model" axis
    each weight is this device's slice of what SPLIT puts on "model", and the
    result is this slice's part of a sum that the step completes with one psum
    over "model": the model-split axis must enter linearly at the end (split
    the first matmul by columns, the last by rows, elementwise between)."""
{%- if cookiecutter.example != "none" %}
    return matmul(jnp.tanh(matmul(h, w_in)), w_out)
{%- else %}
    # TODO: your block's branch; a linear block to start from (no activation).
    return matmul(matmul(h, w_in), w_out)
{%- endif %}
