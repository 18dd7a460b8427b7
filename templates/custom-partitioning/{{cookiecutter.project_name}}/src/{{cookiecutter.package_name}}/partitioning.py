"""What a custom_partitioning op needs beside its own rule: the types a
partition callback sees, the mesh axes an operand is sharded over, whether it
lives on Explicit mesh axes, and a vmap rule for an op whose operands and
results all have rows first.

Machinery: the op's module (src/{{ cookiecutter.package_name }}/{{ cookiecutter.op_name }}.py) imports it; an op
of your own uses it as it is.
"""

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, Sharding

# The mesh axes one array axis is sharded over (None: not sharded).
type AxisNames = str | tuple[str, ...] | None
# A sharding's mesh (concrete when the partitioner calls the rule).
type AnyMesh = Mesh | AbstractMesh
# What custom_partitioning passes a partition callback: abstract arrays with
# their shardings, one per operand.
type Shapes = tuple[jax.ShapeDtypeStruct, ...]


def explicit(x: jax.Array) -> bool:
    """Whether x lives on a mesh with Explicit axes (jax.make_mesh's default):
    custom_partitioning fails there at run time, so shard_map runs instead."""
    return AxisType.Explicit in jax.typeof(x).sharding.mesh.axis_types


def mesh_and_axes(sharding: Sharding, ndim: int) -> tuple[AnyMesh, tuple[AxisNames, ...]]:
    """The mesh, and the mesh axes each of an operand's ndim axes is sharded
    over, from its sharding.

    A program that names no mesh (a NumPy input under jax.set_mesh, say) gives
    the partition callback a sharding without axis names: nothing can stay
    sharded then, so the mesh is its devices on one axis and every axis whole
    (whole, replicated operands are always right).
    """
    if not isinstance(sharding, NamedSharding):
        devices = sorted(sharding.device_set, key=attrgetter("id"))
        return Mesh(np.array(devices), ("devices",)), (None,) * ndim
    spec = tuple(sharding.spec) + (None,) * ndim
    return sharding.mesh, spec[:ndim]


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
        out = folded(*(a.reshape(-1, *a.shape[2:]) for a in args))
        unfolded = jax.tree.map(lambda o: o.reshape(axis_size, -1, *o.shape[1:]), out)
        return unfolded, jax.tree.map(lambda _: True, out)

    return folded
