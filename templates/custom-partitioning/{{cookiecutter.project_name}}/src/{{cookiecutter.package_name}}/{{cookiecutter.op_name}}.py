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
scatter that every shard does locally, with no collectives. For second order,
the forward op has a jax.custom_jvp (its tangent gathers the input's tangent
at the winners) and the backward op a jax.custom_vjp of its own (the scatter's
VJP is a gather), both plain JAX. It has no batching rule either: each op is
a jax.custom_batching.custom_vmap that folds the vmapped axis into the rows.
And it does not run under Explicit mesh axes (the default of jax.make_mesh):
there the sharding is known at trace time, so the same per-shard functions run
under jax.shard_map instead, inside the same vmap rule (a vmapped axis split
over the mesh becomes rows split over it).

Under Shardy (the default partitioner) each op needs a sharding_rule, an
einsum-like description of how operand and result dimensions relate.
"""

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
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
    # Each batch shard computes alone; item shards are merged (collectives).
    mesh, (batch_axes, item_axes) = mesh_and_axes(sharding, 2, alone=(0,))
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
    # The row's max and its sum of exponentials, one of each per row across
    # the item shards. A probability is exp(value - max) / sum: a few ulps
    # wherever x lies. exp(value - lse) would carry lse's rounding, an ulp of
    # |lse| (7.6e-6 near 88, where float32's exp overflows), into each one.
    row_max = jnp.max(x, axis=-1)
    if item_axes is not None:
        row_max = jax.lax.pmax(row_max, item_axes)
    total = jnp.sum(jnp.exp(x - row_max[:, None]), axis=-1)
    if item_axes is not None:
        total = jax.lax.psum(total, item_axes)
    lse = row_max + jnp.log(total)
    return jnp.exp(values - row_max[:, None]) / total[:, None], indices, lse


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


def _fwd_rows(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The forward on (rows, items): the partitioned op, or shard_map under
    Explicit axes."""
    out: tuple[jax.Array, jax.Array, jax.Array]
    if not explicit(x):
        out = _top_k_fwd_op(x, k)
        return out
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape, k)
    operand, results = _fwd_specs(batch_axes, item_axes)
    per_shard = partial(_fwd_shard, k=k, item_axes=item_axes, in_shard_map=True)
    # Rows folded in by the vmap rule arrive laid out as they were.
    x = jax.sharding.reshard(x, NamedSharding(mesh, operand))
    out = map_shards(per_shard, mesh, (operand,), results)(x)
    return out


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _fwd(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The forward, with a vmap rule (the vmapped axis folded into the rows)
    and a JVP rule (below)."""
    out: tuple[jax.Array, jax.Array, jax.Array] = rowwise(partial(_fwd_rows, k=k))(x)
    return out


def _pick(a: jax.Array, indices: jax.Array) -> jax.Array:
    """Each row's entries of a (rows, items) at the winners' indices (the
    gather both second-order rules need), laid out like the indices.

    Under Explicit mesh axes the layout must be given: JAX refuses to guess
    how a gather from an items axis split over the mesh is laid out
    (ShardingTypeError); the compiler then moves what it needs."""
    # take_along_axis, not a.at[arange(rows)[:, None], indices]: under vmap
    # with the batch split over an Explicit mesh axis (grad(grad(vmap(op)))
    # outside jax.set_mesh), that gather's index array from the meshless
    # arange failed ("Resource axis ... not found in mesh: ()"). The layout is
    # given on a's mesh.
    layout = jax.typeof(indices).sharding.spec
    out_sharding = NamedSharding(jax.typeof(a).sharding.mesh, layout) if explicit(a) else None
    if not _TAKE_ALONG_AXIS_LAYS_OUT:  # JAX 0.10: the gather's own layout argument
        return a.at[jnp.arange(a.shape[0])[:, None], indices].get(out_sharding=out_sharding)
    return jnp.take_along_axis(a, indices, axis=1, out_sharding=out_sharding)


# take_along_axis takes a result layout from JAX 0.11 (JAX 0.10 reads the
# keyword as an array argument and fails).
_TAKE_ALONG_AXIS_LAYS_OUT = "out_sharding" in inspect.signature(jnp.take_along_axis).parameters


@_fwd.defjvp
def _fwd_jvp(
    k: int, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """The forward's tangent: each winner's value moves with its own item.

    Only second order asks for it: it differentiates the custom_vjp's rules
    below, which first order only runs. (JAX cannot differentiate the
    partitioned op, so this rule must exist even where the backward ignores
    the values, as without softmax.)"""
    (x,), (x_dot,) = primals, tangents
    values, indices, lse = _fwd(x, k)
    values_dot = _pick(x_dot, indices)
    if SOFTMAX:  # values = exp(x[i] - lse): d values = values * (dx[i] - d lse)
        lse_dot = jnp.sum(jnp.exp(x - lse[:, None]) * x_dot, axis=1)
        values_dot = values * (values_dot - lse_dot[:, None])
    else:
        lse_dot = jnp.zeros_like(lse)
    # The integer indices have a tangent of dtype float0 (nothing).
    indices_dot: Any = np.zeros(indices.shape, jax.dtypes.float0)
    return (values, indices, lse), (values_dot, indices_dot, lse_dot)


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


def _bwd_rows(*operands: jax.Array) -> jax.Array:
    """The backward on rows (x, indices, cotangent, values, lse): the
    partitioned op, or shard_map under Explicit axes."""
    x, indices = operands[:2]
    if not explicit(x):
        grad: jax.Array = _top_k_bwd_op(*operands)
        return grad
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding, x.shape, indices.shape[1])
    specs, result = _bwd_specs(batch_axes, item_axes)
    # The cotangent may arrive laid out otherwise (and rows folded in by the
    # vmap rule as they were).
    operands = tuple(
        jax.sharding.reshard(o, NamedSharding(mesh, s))
        for o, s in zip(operands, specs, strict=True)
    )
    per_shard = partial(_bwd_shard, item_axes=item_axes)
    grad = map_shards(per_shard, mesh, specs, result)(*operands)
    return grad


@jax.custom_vjp
def _bwd(
    x: jax.Array, indices: jax.Array, cotangent: jax.Array, values: jax.Array, lse: jax.Array
) -> jax.Array:
    """The backward, with a vmap rule (the vmapped axis folded into the rows)
    and a VJP rule of its own (below)."""
    grad: jax.Array = rowwise(_bwd_rows)(x, indices, cotangent, values, lse)
    return grad


# The backward's residuals: its operands.
BwdResiduals: TypeAlias = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]


def _bwd_fwd(
    x: jax.Array, indices: jax.Array, cotangent: jax.Array, values: jax.Array, lse: jax.Array
) -> tuple[jax.Array, BwdResiduals]:
    return _bwd(x, indices, cotangent, values, lse), (x, indices, cotangent, values, lse)


def _bwd_bwd(residuals: BwdResiduals, g: jax.Array) -> tuple[Any, ...]:
    """The backward's own VJP, which only second order asks for: the scatter's
    transpose, a gather of g at the winners (and the softmax terms)."""
    x, indices, cotangent, values, lse = residuals
    g_picked = _pick(g, indices)
    if not SOFTMAX:  # grad = scatter(cotangent): linear in it, constant in the rest
        zero = jnp.zeros_like
        return zero(x), None, g_picked, zero(values), zero(lse)
    # grad = scatter(s) - p * sum(s), with s = cotangent * values, p = exp(x - lse)
    p = jnp.exp(x - lse[:, None])
    total = jnp.sum(cotangent * values, axis=1, keepdims=True)
    g_s = g_picked - jnp.sum(g * p, axis=1, keepdims=True)
    g_p = g * p * total
    return -g_p, None, g_s * values, g_s * cotangent, jnp.sum(g_p, axis=1)


_bwd.defvjp(_bwd_fwd, _bwd_bwd)


# --- the differentiable op ------------------------------------------------------


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    values, indices, _ = _fwd(x, k)
    return values, indices


# Residuals: x, the top-k indices and values, and each row's log-sum-exp.
Residuals: TypeAlias = tuple[jax.Array, jax.Array, jax.Array, jax.Array]


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
