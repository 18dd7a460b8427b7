"""What a custom_partitioning op needs beside its own rule: the types a
partition callback sees, the mesh axes an operand is sharded over, whether it
lives on Explicit mesh axes (and shard_map for them), and a vmap rule for an
op whose operands and results all have rows first.

Machinery: the op's module (src/{{ cookiecutter.package_name }}/{{ cookiecutter.op_name }}.py) imports it; an op
of your own uses it as it is.
"""

import math
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.sharding_impls import parse_flatten_op_sharding
from jax.custom_batching import custom_vmap
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec, Sharding

# The mesh axes one array axis is sharded over (None: not sharded).
AxisNames: TypeAlias = str | tuple[str, ...] | None
# A sharding's mesh (concrete when the partitioner calls the rule).
AnyMesh: TypeAlias = Mesh | AbstractMesh
# What custom_partitioning passes a partition callback: abstract arrays with
# their shardings, one per operand.
Shapes: TypeAlias = tuple[jax.ShapeDtypeStruct, ...]


def explicit(x: jax.Array) -> bool:
    """Whether x lives on a mesh with Explicit axes (jax.make_mesh's default):
    custom_partitioning fails there at run time, so shard_map runs instead."""
    return AxisType.Explicit in jax.typeof(x).sharding.mesh.axis_types


def map_shards(
    per_shard: Callable[..., Any],
    mesh: AnyMesh,
    in_specs: tuple[PartitionSpec, ...],
    out_specs: Any,
) -> Callable[..., Any]:
    """jax.shard_map of per_shard over the mesh, or per_shard itself where
    in_specs split no operand axis: each device then holds the operands
    whole, and per_shard on whole operands is the op (no collectives).

    A vmap of an axis split over the mesh takes those mesh axes for itself:
    an operand split over all of them reaches the op as whole slices, with no
    mesh axis left for shard_map to go manual over, which JAX 0.12.1 refuses
    (ValueError; 0.12.0 and older ran a shard_map over none)."""
    if all(part is None for spec in in_specs for part in spec):
        return per_shard
    return jax.shard_map(per_shard, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def mesh_and_axes(
    sharding: Sharding, ndim: int, alone: tuple[int, ...] = ()
) -> tuple[AnyMesh, tuple[AxisNames, ...]]:
    """The mesh, and the mesh axes each of an operand's ndim axes is sharded
    over, from its sharding. `alone`: the operand's axes whose shards the
    rule computes alone, with no collective (rows, for a row-wise op).

    Where the program names no mesh, the callback gets XLA's own tiling (a
    GSPMDSharding): inside a shard_map that leaves some mesh axes free
    (axis_names=...), the operand's split over those, numbered within the
    group of devices they span; in a program on no mesh at all (NumPy inputs
    under jax.set_mesh, say), whatever XLA chose. It is read as JAX itself
    reads one (GSPMDSharding._to_sdy_sharding), over a mesh of the tiling's
    own axes (the mesh's devices are placeholders: shardings count mesh
    positions). Only the `alone` axes keep their split: inside a shard_map
    XLA refuses a collective from a partition callback (its verifier wants
    replica groups over every device, the manual axes' too), so the others
    arrive whole, as does every axis of a tiling that no mesh makes (devices
    out of iota order): whole, replicated operands are always right. (JAX has
    no public reader of an XLA tiling: this one is internal, jax._src.)
    """
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * ndim
        return sharding.mesh, spec[:ndim]
    tiling = sharding._to_xla_hlo_sharding(ndim)
    devices = sorted(sharding.device_set, key=attrgetter("id"))
    if not (tiling.is_tiled() and tiling.is_tile_assignment_iota()):
        return Mesh(np.array(devices), ("devices",)), (None,) * ndim
    sizes = tuple(tiling.get_axis_sizes())
    names = tuple(f"tiled_{i}" for i in range(len(sizes)))
    mesh = Mesh(np.array(devices[: math.prod(sizes)]).reshape(sizes), names)
    (parsed,) = parse_flatten_op_sharding(tiling, mesh)
    split = tuple(parsed) + (None,) * ndim
    return mesh, tuple(split[i] if i in alone else None for i in range(ndim))


def mesh_size(mesh: AnyMesh, axes: AxisNames) -> int:
    """How many shards the mesh axes `axes` split an array axis into."""
    names = () if axes is None else (axes,) if isinstance(axes, str) else axes
    size = 1
    for name in names:
        size *= mesh.shape[name]
    return size


def shard_offset(axes: AxisNames, local_size: int) -> jax.Array | int:
    """The global index of this shard's first element along an array axis
    split over the mesh axes `axes` (inside the per-shard function)."""
    if axes is None:
        return 0
    return jax.lax.axis_index(axes) * local_size


def rowwise(op: Callable[..., Any]) -> Callable[..., Any]:
    """op, whose operands and results all have rows first, with a vmap rule.

    custom_partitioning has no batching rule. Rows are independent, so the
    rule folds the vmapped axis into the rows, calls op once, and unfolds.
    """
    folded = custom_vmap(op)

    @folded.def_vmap
    def fold(axis_size: int, in_batched: list[bool], *args: jax.Array) -> tuple[Any, Any]:
        args = tuple(
            a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))
            for a, batched in zip(args, in_batched, strict=True)
        )
        # Under Explicit mesh axes the folded rows must stay split as they
        # come: a whole batch axis before split rows cannot merge with them
        # (JAX refuses the reshape), so there the rows go first, each row's
        # batch after it (rows are independent: their order is free).
        first = next(a for a, batched in zip(args, in_batched, strict=True) if batched)
        spec = (*jax.typeof(first).sharding.spec, None, None)
        rows_first = spec[0] is None and spec[1] is not None
        if rows_first:
            args = tuple(jnp.swapaxes(a, 0, 1) for a in args)
        out = folded(*(a.reshape(-1, *a.shape[2:]) for a in args))

        def unfold(o: jax.Array) -> jax.Array:
            if rows_first:
                return jnp.swapaxes(o.reshape(-1, axis_size, *o.shape[1:]), 0, 1)
            return o.reshape(axis_size, -1, *o.shape[1:])

        return jax.tree.map(unfold, out), jax.tree.map(lambda _: True, out)

    return folded
