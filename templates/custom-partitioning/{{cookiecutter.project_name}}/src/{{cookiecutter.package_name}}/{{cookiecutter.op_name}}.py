"""Top-k over the last axis, partitioned by hand with custom_partitioning.

Why: XLA's partitioner cannot split lax.top_k. Give it an input sharded over
the batch or the items axis and it all-gathers the whole array onto every
device, then computes the same answer everywhere. The rule below keeps the
input where it is:

- batch-sharded rows are independent: each device runs top-k on its rows;
{%- if cookiecutter.sharded_axes == "batch,items" %}
- items-sharded rows: each device takes the top k of its slice, and only those
  k candidates per shard (values and global indices) are all-gathered and
  merged: k * shards numbers per row move instead of the whole row.
{%- else %}
- the items axis must be whole on each device: if it arrives sharded, the
  partitioner gathers it (set sharded_axes=batch,items to avoid that).
{%- endif %}
{%- if cookiecutter.normalize == "softmax" %}
- softmax needs the row's max and sum of exponentials: with items sharded
  that is a pmax and a psum of one number per row across the item shards.
{%- endif %}

custom_partitioning has no autodiff rule, so {{ cookiecutter.op_name }} is a jax.custom_vjp whose
forward and backward are each a custom_partitioning op; the backward is a
scatter that every shard does locally, with no collectives. It has no batching
rule either: each op is a jax.custom_batching.custom_vmap that folds the
vmapped axis into the rows. And it does not run under Explicit mesh axes (the
default of jax.make_mesh): there the sharding is known at trace time, so the
same per-shard functions run under jax.shard_map instead.

Under Shardy (the default partitioner) each op needs a sharding_rule, an
einsum-like description of how operand and result dimensions relate.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

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
    mesh_and_axes,
    mesh_size,
    rowwise,
    shard_offset,
)

SHARD_ITEMS = {{ "True" if cookiecutter.sharded_axes == "batch,items" else "False" }}  # keep the items axis sharded
SOFTMAX = {{ "True" if cookiecutter.normalize == "softmax" else "False" }}  # values are softmax probabilities


def {{ cookiecutter.op_name }}(x: ArrayLike, k: int) -> tuple[jax.Array, jax.Array]:
    """The k largest entries of each row of x (batch, items), largest first.

    Returns (values, indices), each (batch, k), sharded like x's batch axis and
    replicated over the rest. Ties go to the lower index, as in lax.top_k.
    Differentiable with respect to x (reverse mode). Like lax.top_k, x may
    also be one row of items, or have more leading axes than one.
    """
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(f"expected x of shape (batch, items) or (..., items), got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"expected a floating-point x, got {x.dtype}")
    items = x.shape[-1]
    # Annotated int, checked anyway for callers without a type checker (k=2.0).
    if not isinstance(k, int) or not 1 <= k <= items:  # type: ignore[redundant-expr]
        raise ValueError(f"k must be an int in [1, {items}] (the number of items), got {k!r}")
    if x.ndim != 2:  # the rule is written for (rows, items): fold the other axes into rows
        values, indices = {{ cookiecutter.op_name }}(x.reshape(-1, items), k)
        return values.reshape(*x.shape[:-1], k), indices.reshape(*x.shape[:-1], k)
    if explicit(x):
        # Lay x out as the per-shard functions need it (items whole where
        # they cannot stay sharded); autodiff reshards the gradient back.
        mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape, k)
        x = jax.sharding.reshard(x, NamedSharding(mesh, P(batch_axes, item_axes)))
    return _top_k(x, k)


# --- which axes stay sharded ------------------------------------------------


def _mesh_and_axes(
    sharding: Sharding, shape: tuple[int, ...], k: int
) -> tuple[AnyMesh, AxisNames, AxisNames]:
    """The mesh, and the mesh axes to keep on (batch, items), from the
    operand's sharding.

    The items axis stays sharded only when every shard holds at least k items
    and the shards are equal: XLA pads uneven shards, and padding must never
    win a top-k. Otherwise the rule asks for the items axis whole.
    """
    mesh, (batch_axes, item_axes) = mesh_and_axes(sharding, 2)
    if item_axes is not None:
        shards = mesh_size(mesh, item_axes)
        if not SHARD_ITEMS or shape[1] % shards or shape[1] // shards < k:
            item_axes = None
    return mesh, batch_axes, item_axes


# --- forward: top-k of each shard, merged across item shards -----------------


@partial(custom_partitioning, static_argnums=(1,))
def _top_k_fwd_op(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    values, indices = jax.lax.top_k(x, k)
    return _finish(x, values, indices, item_axes=None)


def _finish(
    x: jax.Array, values: jax.Array, indices: jax.Array, item_axes: AxisNames
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Softmax of the top-k values when asked; also returns the row's
    log-sum-exp for the backward pass (zeros, unused, without softmax)."""
    if not SOFTMAX:
        return values, indices, jnp.zeros(x.shape[:1], x.dtype)
    if item_axes is None:
        lse = jax.nn.logsumexp(x, axis=-1)
    else:  # one max and one sum per row across the item shards
        row_max = jax.lax.pmax(jnp.max(x, axis=-1), item_axes)
        total = jax.lax.psum(jnp.sum(jnp.exp(x - row_max[:, None]), axis=-1), item_axes)
        lse = row_max + jnp.log(total)
    return jnp.exp(values - lse[:, None]), indices, lse


def _fwd_shard(
    x: jax.Array, k: int, item_axes: AxisNames, in_shard_map: bool
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The forward on one shard of x, under the partitioner or (in_shard_map)
    shard_map."""
    values, indices = jax.lax.top_k(x, k)
    indices = indices + shard_offset(item_axes, x.shape[1])
    if item_axes is not None:
        # Merge: every shard's k candidates, in shard order, then top k
        # again. Ties keep the lower shard, hence the lower global index.
        # Under shard_map, to="invarying": every item shard then holds the
        # same rows, which shard_map's type check must know to accept them
        # replicated. The partitioner has no such check, and there
        # "invarying" fails on JAX 0.10 and 0.11 (its pvary asks for Manual
        # mesh axes), so the plain all_gather (the same HLO).
        to = "invarying" if in_shard_map else "varying"
        values = jax.lax.all_gather(values, item_axes, axis=1, tiled=True, to=to)
        indices = jax.lax.all_gather(indices, item_axes, axis=1, tiled=True, to=to)
        values, best = jax.lax.top_k(values, k)
        indices = jnp.take_along_axis(indices, best, axis=1)
    return _finish(x, values, indices, item_axes)


def _fwd_specs(batch_axes: AxisNames, item_axes: AxisNames) -> tuple[P, tuple[P, P, P]]:
    """The forward's operand and result layouts: x as the shard needs it;
    values, indices and the log-sum-exp by rows."""
    return P(batch_axes, item_axes), (P(batch_axes, None), P(batch_axes, None), P(batch_axes))


def _partition_fwd(
    k: int, mesh: AnyMesh, arg_shapes: Shapes, result_shape: Shapes
) -> tuple[AnyMesh, Callable[..., tuple[jax.Array, ...]], tuple[Sharding, ...], tuple[Sharding]]:
    x_shape = arg_shapes[0]
    mesh, batch_axes, item_axes = _mesh_and_axes(x_shape.sharding, x_shape.shape, k)
    operand, results = _fwd_specs(batch_axes, item_axes)
    per_shard = partial(_fwd_shard, k=k, item_axes=item_axes, in_shard_map=False)
    named = partial(NamedSharding, mesh)
    return mesh, per_shard, tuple(map(named, results)), (named(operand),)


_top_k_fwd_op.def_partition(
    partition=_partition_fwd,
    sharding_rule="b n -> b k, b k, b",
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _fwd(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The forward: the partitioned op, or shard_map under Explicit axes."""
    if explicit(x):
        mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape, k)
        operand, results = _fwd_specs(batch_axes, item_axes)
        per_shard = partial(_fwd_shard, k=k, item_axes=item_axes, in_shard_map=True)
        op: Callable[..., Any] = jax.shard_map(
            per_shard, mesh=mesh, in_specs=operand, out_specs=results
        )
    else:
        op = rowwise(lambda x: _top_k_fwd_op(x, k))
    out: tuple[jax.Array, jax.Array, jax.Array] = op(x)
    return out


# --- backward: scatter the cotangent into each shard's own items -------------


@custom_partitioning
def _top_k_bwd_op(
    x: jax.Array, indices: jax.Array, cotangent: jax.Array, values: jax.Array, lse: jax.Array
) -> jax.Array:
    return _scatter_grad(x, indices, cotangent, values, lse, offset=0)


def _scatter_grad(
    x: jax.Array,
    indices: jax.Array,
    cotangent: jax.Array,
    values: jax.Array,
    lse: jax.Array,
    offset: jax.Array | int,
) -> jax.Array:
    """d(loss)/dx for this block of x, given the cotangent of the top-k values."""
    if SOFTMAX:
        # values_j = exp(x[i_j] - lse): d values_j / dx = values_j * (onehot(i_j) - p)
        cotangent = cotangent * values
    local = indices - offset
    # Items of other shards go to an out-of-range position and are dropped.
    # (Negative positions would wrap around, so they must not reach the scatter.)
    local = jnp.where((local >= 0) & (local < x.shape[1]), local, x.shape[1])
    rows = jnp.arange(x.shape[0])[:, None]
    grad = jnp.zeros_like(x).at[rows, local].add(cotangent, mode="drop")
    if SOFTMAX:
        p = jnp.exp(x - lse[:, None])
        grad = grad - p * jnp.sum(cotangent, axis=1, keepdims=True)
    return grad


def _bwd_shard(
    x: jax.Array,
    indices: jax.Array,
    cotangent: jax.Array,
    values: jax.Array,
    lse: jax.Array,
    item_axes: AxisNames,
) -> jax.Array:
    """The backward on one shard of x, under the partitioner or shard_map."""
    offset = shard_offset(item_axes, x.shape[1])
    return _scatter_grad(x, indices, cotangent, values, lse, offset)


def _bwd_specs(batch_axes: AxisNames, item_axes: AxisNames) -> tuple[tuple[P, ...], P]:
    """The backward's operand layouts (x's block, the rest by rows) and its
    result's (x's block)."""
    block, rows = P(batch_axes, item_axes), P(batch_axes, None)
    return (block, rows, rows, rows, P(batch_axes)), block


def _partition_bwd(
    mesh: AnyMesh, arg_shapes: Shapes, result_shape: jax.ShapeDtypeStruct
) -> tuple[AnyMesh, Callable[..., jax.Array], Sharding, tuple[Sharding, ...]]:
    x_shape = arg_shapes[0]
    k = arg_shapes[1].shape[1]
    mesh, batch_axes, item_axes = _mesh_and_axes(x_shape.sharding, x_shape.shape, k)
    operands, result = _bwd_specs(batch_axes, item_axes)
    per_shard = partial(_bwd_shard, item_axes=item_axes)
    named = partial(NamedSharding, mesh)
    return mesh, per_shard, named(result), tuple(map(named, operands))


_top_k_bwd_op.def_partition(
    partition=_partition_bwd,
    sharding_rule="b n, b k, b k, b k, b -> b n",
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _bwd(
    x: jax.Array, indices: jax.Array, cotangent: jax.Array, values: jax.Array, lse: jax.Array
) -> jax.Array:
    """The backward: the partitioned op, or shard_map under Explicit axes."""
    if explicit(x):
        mesh, batch_axes, item_axes = _mesh_and_axes(
            jax.typeof(x).sharding, x.shape, indices.shape[1]
        )
        operands, result = _bwd_specs(batch_axes, item_axes)
        # The cotangent may arrive laid out otherwise.
        cotangent = jax.sharding.reshard(cotangent, NamedSharding(mesh, operands[2]))
        per_shard = partial(_bwd_shard, item_axes=item_axes)
        op: Callable[..., Any] = jax.shard_map(
            per_shard, mesh=mesh, in_specs=operands, out_specs=result
        )
    else:
        op = rowwise(_top_k_bwd_op)
    grad: jax.Array = op(x, indices, cotangent, values, lse)
    return grad


# --- the differentiable op ------------------------------------------------------


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    values, indices, _ = _fwd(x, k)
    return values, indices


# Residuals: x, the top-k indices and values, and each row's log-sum-exp.
type Residuals = tuple[jax.Array, jax.Array, jax.Array, jax.Array]


def _top_k_fwd(x: jax.Array, k: int) -> tuple[tuple[jax.Array, jax.Array], Residuals]:
    values, indices, lse = _fwd(x, k)
    return (values, indices), (x, indices, values, lse)


def _top_k_bwd(
    k: int, residuals: Residuals, cotangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array]:
    x, indices, values, lse = residuals
    cotangent_values, _ = cotangents  # the integer indices have no cotangent
    return (_bwd(x, indices, cotangent_values.astype(x.dtype), values, lse),)


_top_k.defvjp(_top_k_fwd, _top_k_bwd)
