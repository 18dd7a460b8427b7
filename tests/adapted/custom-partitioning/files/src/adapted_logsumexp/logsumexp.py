"""Log-sum-exp of each row, partitioned by hand with custom_partitioning.

Rows are independent, so batch-sharded rows need no communication. On
items-sharded rows each shard reduces its own slice, and the partials are
merged with one pmax (the row maximum, for stability) and one psum (the sum
of exponentials): one number per row moves, never the row itself. The
gradient, exp(x - lse) times the row's cotangent, is local to each shard.

custom_partitioning has no autodiff rule, so logsumexp is a jax.custom_vjp
whose forward and backward are each a custom_partitioning op; each goes
through partitioning.rowwise for vmap, and under Explicit mesh axes the same
per-shard functions run under jax.shard_map.
"""

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, Sharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from .partitioning import (
    AnyMesh,
    AxisNames,
    Shapes,
    explicit,
    map_shards,
    mesh_and_axes,
    mesh_size,
    rowwise,
)

SHARD_ITEMS = True  # keep the items axis sharded (False: gather whole rows)


def logsumexp(x: ArrayLike) -> jax.Array:
    """log(sum(exp(x))) over the last axis of x (batch, items), one per row,
    sharded like x's batch axis. x may have more leading axes, or none.
    Differentiable with respect to x (reverse mode)."""
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(f"expected x of shape (batch, items) or (..., items), got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"expected a floating-point x, got {x.dtype}")
    if x.ndim != 2:  # the rule is written for (rows, items): fold the other axes into rows
        return logsumexp(x.reshape(-1, x.shape[-1])).reshape(x.shape[:-1])
    if explicit(x):
        mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape)
        x = jax.sharding.reshard(x, NamedSharding(mesh, P(batch_axes, item_axes)))
    return _lse(x)


def _mesh_and_axes(
    sharding: Sharding, shape: tuple[int, ...]
) -> tuple[AnyMesh, AxisNames, AxisNames]:
    """The mesh axes to keep on (batch, items). Items stay sharded only in
    equal shards: XLA pads uneven ones, and padding would join the max and
    the sum."""
    # Each batch shard computes alone; item shards are merged (collectives).
    mesh, (batch_axes, item_axes) = mesh_and_axes(sharding, 2, alone=(0,))
    if item_axes is not None and (not SHARD_ITEMS or shape[1] % mesh_size(mesh, item_axes)):
        item_axes = None
    return mesh, batch_axes, item_axes


# --- forward: each shard's partial max and sum, merged across item shards -----


def _fwd_shard(x: jax.Array, item_axes: AxisNames) -> jax.Array:
    row_max = jnp.max(x, axis=-1)
    if item_axes is not None:
        row_max = jax.lax.pmax(row_max, item_axes)
    row_max = jax.lax.stop_gradient(row_max)
    total = jnp.sum(jnp.exp(x - row_max[:, None]), axis=-1)
    if item_axes is not None:
        total = jax.lax.psum(total, item_axes)
    return row_max + jnp.log(total)


@custom_partitioning
def _fwd_op(x: jax.Array) -> jax.Array:
    return _fwd_shard(x, item_axes=None)


def _partition_fwd(
    mesh: AnyMesh, arg_shapes: Shapes, result_shape: jax.ShapeDtypeStruct
) -> tuple[AnyMesh, Callable[..., jax.Array], Sharding, tuple[Sharding]]:
    x_shape = arg_shapes[0]
    mesh, batch_axes, item_axes = _mesh_and_axes(x_shape.sharding, x_shape.shape)
    named = partial(NamedSharding, mesh)
    per_shard = partial(_fwd_shard, item_axes=item_axes)
    return mesh, per_shard, named(P(batch_axes)), (named(P(batch_axes, item_axes)),)


_fwd_op.def_partition(
    partition=_partition_fwd,
    sharding_rule="b n -> b",
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _fwd_rows(x: jax.Array) -> jax.Array:
    out: jax.Array
    if not explicit(x):
        out = _fwd_op(x)
        return out
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape)
    block = P(batch_axes, item_axes)
    per_shard = partial(_fwd_shard, item_axes=item_axes)
    # Rows folded in by the vmap rule arrive laid out as they were.
    x = jax.sharding.reshard(x, NamedSharding(mesh, block))
    out = map_shards(per_shard, mesh, (block,), P(batch_axes))(x)
    return out


def _fwd(x: jax.Array) -> jax.Array:
    out: jax.Array = rowwise(_fwd_rows)(x)
    return out


# --- backward: the softmax times the row's cotangent, shard by shard ----------


def _bwd_shard(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    return cotangent[:, None] * jnp.exp(x - lse[:, None])


@custom_partitioning
def _bwd_op(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    return _bwd_shard(x, lse, cotangent)


def _partition_bwd(
    mesh: AnyMesh, arg_shapes: Shapes, result_shape: jax.ShapeDtypeStruct
) -> tuple[AnyMesh, Callable[..., jax.Array], Sharding, tuple[Sharding, ...]]:
    x_shape = arg_shapes[0]
    mesh, batch_axes, item_axes = _mesh_and_axes(x_shape.sharding, x_shape.shape)
    named = partial(NamedSharding, mesh)
    block, rows = named(P(batch_axes, item_axes)), named(P(batch_axes))
    return mesh, _bwd_shard, block, (block, rows, rows)


_bwd_op.def_partition(
    partition=_partition_bwd,
    sharding_rule="b n, b, b -> b n",
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _bwd_rows(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    grad: jax.Array
    if not explicit(x):
        grad = _bwd_op(x, lse, cotangent)
        return grad
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape)
    block, rows = P(batch_axes, item_axes), P(batch_axes)
    # The cotangent may arrive laid out otherwise (and rows folded in by the
    # vmap rule as they were).
    x, lse, cotangent = (
        jax.sharding.reshard(a, NamedSharding(mesh, s))
        for a, s in zip((x, lse, cotangent), (block, rows, rows), strict=True)
    )
    op = map_shards(_bwd_shard, mesh, (block, rows, rows), block)
    grad = op(x, lse, cotangent)
    return grad


def _bwd(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    # The explicit path inside the vmap rule: under vmap over an axis split
    # over an Explicit mesh axis, JAX batches a custom_vjp's rules without
    # marking that axis as vmapped, and a shard_map there would gather it.
    grad: jax.Array = rowwise(_bwd_rows)(x, lse, cotangent)
    return grad


# --- the differentiable op ------------------------------------------------------


@jax.custom_vjp
def _lse(x: jax.Array) -> jax.Array:
    return _fwd(x)


def _lse_fwd(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    lse = _fwd(x)
    return lse, (x, lse)


def _lse_bwd(residuals: tuple[jax.Array, jax.Array], cotangent: jax.Array) -> tuple[jax.Array]:
    x, lse = residuals
    return (_bwd(x, lse, cotangent.astype(x.dtype)),)


_lse.defvjp(_lse_fwd, _lse_bwd)
