"""A sharded training step of a residual MLP: FSDP with shard_map, a
checkpoint policy and buffer donation, checked against a plain-JAX oracle."""

from .reference import reference_loss, reference_step
from .sharded_step import loss, make_mesh, shard_batch, shard_params, train_step

__all__ = [
    "loss",
    "make_mesh",
    "reference_loss",
    "reference_step",
    "shard_batch",
    "shard_params",
    "train_step",
]
