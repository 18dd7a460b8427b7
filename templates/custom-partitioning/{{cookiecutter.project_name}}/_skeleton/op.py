"""{{ cookiecutter.op_name }}: partitioned by hand with custom_partitioning.

TODO: say what your op computes, and what each shard can do alone. This
skeleton squares each entry (x * x), about the simplest op whose gradient
needs its input: every shard computes its own block of the result and of the
gradient, so nothing moves between devices. Replace the per-shard maths
(_fwd_shard, _bwd_shard), the layouts (_fwd_specs, _bwd_specs) and the
sharding_rule strings with your op's; keep the wiring, which every
custom_partitioning op needs:

- custom_partitioning has no autodiff rule, so the op is a jax.custom_vjp
  whose forward and backward are each a custom_partitioning op; for second
  order, the forward has a jax.custom_jvp (_fwd_jvp) and the backward a
  jax.custom_vjp of its own (_bwd_bwd), both plain JAX;
- it has no batching rule either: each op goes through partitioning.rowwise,
  a custom_vmap that folds the vmapped axis into the rows;
- it does not run under Explicit mesh axes (the default of jax.make_mesh):
  there the sharding is known at trace time, so the same per-shard functions
  run under jax.shard_map instead, inside the same vmap rule (a vmapped axis
  split over the mesh becomes rows split over it).

Under Shardy (the default partitioner) each op needs a sharding_rule, an
einsum-like description of how operand and result dimensions relate.
"""

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, Sharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from .partitioning import AnyMesh, AxisNames, Shapes, explicit, map_shards, mesh_and_axes, rowwise

SHARD_ITEMS = {{ "True" if cookiecutter.sharded_axes == "batch,items" else "False" }}  # keep the items axis sharded


def {{ cookiecutter.op_name }}(x: ArrayLike) -> jax.Array:
    """TODO: what your op returns. Here: x * x, for x of shape (batch, items)
    (or (..., items): the leading axes are folded into rows).

    Differentiable with respect to x (reverse mode).
    """
    x = jnp.asarray(x)
    # TODO: your op's input checks, each with a clear message.
    if x.ndim == 0:
        raise ValueError(f"expected x of shape (batch, items) or (..., items), got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"expected a floating-point x, got {x.dtype}")
    if x.ndim != 2:  # the rule is written for (rows, items): fold the other axes into rows
        return {{ cookiecutter.op_name }}(x.reshape(-1, x.shape[-1])).reshape(x.shape)
    if explicit(x):
        # Lay x out as the per-shard functions need it (items whole where
        # they cannot stay sharded); autodiff reshards the gradient back.
        sharding = jax.typeof(x).sharding
        mesh, batch_axes, item_axes = _mesh_and_axes(sharding)
        x = jax.sharding.reshard(x, NamedSharding(mesh, P(batch_axes, item_axes)))
        # The result typed as x * x's would be: laid out as x was (each
        # device keeps its slice of a gathered axis, no collective). TODO:
        # your result's layout where it is not x's.
        out: jax.Array = jax.sharding.reshard(_op(x), sharding)
        return out
    return _op(x)


def _mesh_and_axes(sharding: Sharding) -> tuple[AnyMesh, AxisNames, AxisNames]:
    """The mesh, and the mesh axes to keep on (batch, items), from the
    operand's sharding. TODO: where your op cannot keep an axis sharded (a
    shard too small, uneven shards that XLA pads), ask for it whole (None)."""
    # alone: the axes whose shards the per-shard functions compute with no
    # collective (both, for x * x). TODO: (0,) once yours combine items.
    mesh, (batch_axes, item_axes) = mesh_and_axes(sharding, 2, alone=(0, 1))
    return mesh, batch_axes, item_axes if SHARD_ITEMS else None


# --- forward ------------------------------------------------------------------


def _fwd_shard(x: jax.Array, item_axes: AxisNames) -> jax.Array:
    """The forward on one block of x, under the partitioner or shard_map.

    TODO: your op on one block. Where the items axis is sharded (item_axes is
    not None), combine the shards' partial results with collectives over
    item_axes (jax.lax.psum, pmax, all_gather; partitioning.shard_offset gives
    this shard's first global item)."""
    return x * x


@custom_partitioning
def _fwd_op(x: jax.Array) -> jax.Array:
    return _fwd_shard(x, item_axes=None)


def _fwd_specs(batch_axes: AxisNames, item_axes: AxisNames) -> tuple[P, P]:
    """The forward's operand and result layouts. TODO: your result's."""
    return P(batch_axes, item_axes), P(batch_axes, item_axes)


def _partition_fwd(
    mesh: AnyMesh, arg_shapes: Shapes, result_shape: jax.ShapeDtypeStruct
) -> tuple[AnyMesh, Callable[..., jax.Array], Sharding, tuple[Sharding]]:
    mesh, batch_axes, item_axes = _mesh_and_axes(arg_shapes[0].sharding)
    operand, result = _fwd_specs(batch_axes, item_axes)
    named = partial(NamedSharding, mesh)
    return mesh, partial(_fwd_shard, item_axes=item_axes), named(result), (named(operand),)


_fwd_op.def_partition(
    partition=_partition_fwd,
    sharding_rule="b n -> b n",  # TODO: your op's dimensions, e.g. "b n -> b" for a row reduction
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _fwd_rows(x: jax.Array) -> jax.Array:
    """The forward on rows: the partitioned op, or shard_map under Explicit
    axes."""
    if not explicit(x):
        out: jax.Array = _fwd_op(x)
        return out
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding)
    operand, result = _fwd_specs(batch_axes, item_axes)
    per_shard = partial(_fwd_shard, item_axes=item_axes)
    # Rows folded in by the vmap rule arrive laid out as they were.
    x = jax.sharding.reshard(x, NamedSharding(mesh, operand))
    out = map_shards(per_shard, mesh, (operand,), result)(x)
    return out


@jax.custom_jvp
def _fwd(x: jax.Array) -> jax.Array:
    """The forward, with a vmap rule (the vmapped axis folded into the rows)
    and a JVP rule (below)."""
    out: jax.Array = rowwise(_fwd_rows)(x)
    return out


@_fwd.defjvp
def _fwd_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    """The forward's tangent, which only second order asks for (first order
    runs the custom_vjp's rules below, second order differentiates them, and
    JAX cannot differentiate the partitioned op). TODO: your op's JVP, in
    plain JAX."""
    (x,), (x_dot,) = primals, tangents
    return _fwd(x), 2 * x * x_dot


# --- backward -----------------------------------------------------------------


def _bwd_shard(x: jax.Array, cotangent: jax.Array, item_axes: AxisNames) -> jax.Array:
    """d(loss)/dx for one block of x, given the cotangent of the result.

    TODO: your op's vector-Jacobian product on one block (with collectives
    over item_axes where a block needs the others' partial results)."""
    return 2 * x * cotangent


@custom_partitioning
def _bwd_op(x: jax.Array, cotangent: jax.Array) -> jax.Array:
    return _bwd_shard(x, cotangent, item_axes=None)


def _bwd_specs(batch_axes: AxisNames, item_axes: AxisNames) -> tuple[tuple[P, P], P]:
    """The backward's operand layouts (x's block, the cotangent's) and its
    result's (x's block). TODO: your cotangent's, laid out like your result."""
    block = P(batch_axes, item_axes)
    return (block, block), block


def _partition_bwd(
    mesh: AnyMesh, arg_shapes: Shapes, result_shape: jax.ShapeDtypeStruct
) -> tuple[AnyMesh, Callable[..., jax.Array], Sharding, tuple[Sharding, ...]]:
    mesh, batch_axes, item_axes = _mesh_and_axes(arg_shapes[0].sharding)
    operands, result = _bwd_specs(batch_axes, item_axes)
    named = partial(NamedSharding, mesh)
    per_shard = partial(_bwd_shard, item_axes=item_axes)
    return mesh, per_shard, named(result), tuple(map(named, operands))


_bwd_op.def_partition(
    partition=_partition_bwd,
    sharding_rule="b n, b n -> b n",  # TODO: x's dimensions, the cotangent's -> x's
    need_replication_factors=() if SHARD_ITEMS else ("n",),
)


def _bwd_rows(x: jax.Array, cotangent: jax.Array) -> jax.Array:
    """The backward on rows: the partitioned op, or shard_map under Explicit
    axes."""
    if not explicit(x):
        grad: jax.Array = _bwd_op(x, cotangent)
        return grad
    mesh, batch_axes, item_axes = _mesh_and_axes(jax.typeof(x).sharding)
    operands, result = _bwd_specs(batch_axes, item_axes)
    # The cotangent may arrive laid out otherwise (and rows folded in by the
    # vmap rule as they were).
    x, cotangent = (
        jax.sharding.reshard(a, NamedSharding(mesh, s))
        for a, s in zip((x, cotangent), operands, strict=True)
    )
    per_shard = partial(_bwd_shard, item_axes=item_axes)
    grad = map_shards(per_shard, mesh, operands, result)(x, cotangent)
    return grad


@jax.custom_vjp
def _bwd(x: jax.Array, cotangent: jax.Array) -> jax.Array:
    """The backward, with a vmap rule (the vmapped axis folded into the rows)
    and a VJP rule of its own (below)."""
    grad: jax.Array = rowwise(_bwd_rows)(x, cotangent)
    return grad


def _bwd_fwd(x: jax.Array, cotangent: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    return _bwd(x, cotangent), (x, cotangent)


def _bwd_bwd(residuals: tuple[jax.Array, jax.Array], g: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The backward's own VJP, which only second order asks for. TODO: your
    backward's VJP, in plain JAX: here that of 2 * x * cotangent."""
    x, cotangent = residuals
    return 2 * cotangent * g, 2 * x * g


_bwd.defvjp(_bwd_fwd, _bwd_bwd)


# --- the differentiable op ------------------------------------------------------


@jax.custom_vjp
def _op(x: jax.Array) -> jax.Array:
    return _fwd(x)


def _op_fwd(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    # TODO: the residuals your backward needs (here x itself).
    return _fwd(x), x


def _op_bwd(x: jax.Array, cotangent: jax.Array) -> tuple[jax.Array]:
    return (_bwd(x, cotangent.astype(x.dtype)),)


_op.defvjp(_op_fwd, _op_bwd)
