"""Top-k over the last axis that runs shard by shard (jax custom_partitioning)."""

from .reference import top_k_reference
from .sharded_top_k import top_k

__all__ = ["top_k", "top_k_reference"]
