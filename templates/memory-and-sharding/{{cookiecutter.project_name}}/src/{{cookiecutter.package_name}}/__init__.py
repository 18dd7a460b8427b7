"""A sharded training step of a residual model built from one block
({{ cookiecutter.op_name }}.py, its reference in reference.py): FSDP with shard_map, a
checkpoint policy and buffer donation, checked against a plain-JAX oracle."""

from .sharded_step import (
    loss,
    make_mesh,
    reference_loss,
    reference_step,
    shard_batch,
    shard_params,
    train_step,
)

__all__ = [
    "loss",
    "make_mesh",
    "reference_loss",
    "reference_step",
    "shard_batch",
    "shard_params",
    "train_step",
]
