"""{{ cookiecutter.op_name }} for jit with Auto shardings: a custom_partitioning rule,
built from the op's declaration (SHARDING_RULE and WHOLE_AXES in
{{ cookiecutter.op_name }}.py); nothing here is specific to one op.

XLA's partitioner cannot see into a Pallas kernel. Give it a sharded operand
and it all-gathers every operand onto every device and runs the whole kernel
there: correct, but each device does all the work and holds all the data.
{{ cookiecutter.op_name }}_partitioned tells it what the kernel can do per shard instead:

- SHARDING_RULE, an einsum-like rule (for a matmul "m k, k n, n -> m n"),
  names each operand's axes and the output's: an axis may stay sharded where
  each output block needs only the same shard of every operand, so every
  device runs the kernel on its own blocks with no communication;
- WHOLE_AXES must be whole on each device (a contracted axis, where what
  follows the sum cannot run on partial sums; a softmax's row): if one arrives
  sharded, the partitioner gathers it (the rule's need_replication_factors).

Limits of custom_partitioning on JAX 0.12: no autodiff rule (so this is a
jax.custom_vjp around it), no vmap, no jax.export (export {{ cookiecutter.op_name }}
itself) and no Explicit mesh axes (there this calls {{ cookiecutter.op_name }}, which runs
the kernel per shard through shard_map).

The backward here is the reference's VJP, which XLA partitions on its own
(a gradient that sums over a sharded axis, as a data-parallel weight
gradient does, ends in an all-reduce over its shards). To run backward kernels per shard
too, give each its own custom_partitioning op with its own rule.
"""

import math
from collections.abc import Callable
from functools import partial
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.sharding_impls import parse_flatten_op_sharding
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AbstractMesh, Mesh, NamedSharding, Sharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import backend, composition
from .reference import {{ cookiecutter.op_name }}_reference

# isort: split
from .{{ cookiecutter.op_name }} import (
    IMPLEMENTATION_ENV,
    SHARDING_RULE,
    WHOLE_AXES,
    check_operands,
    kernel_only,
)

# What custom_partitioning passes a partition callback: abstract arrays with
# their shardings, one per operand.
Shapes: TypeAlias = tuple[jax.ShapeDtypeStruct, ...]
# The op's keyword arguments, as a hashable (static) tuple of pairs.
Options: TypeAlias = tuple[tuple[str, object], ...]
# The op's kernel, whatever its operands (SHARDING_RULE names them).
run_kernel: Callable[..., jax.Array] = kernel_only


def {{ cookiecutter.op_name }}_partitioned(
    *operands: ArrayLike,
    implementation: composition.Implementation = "auto",
    interpret: backend.Interpret = None,
    **blocks: int | None,
) -> jax.Array:
    """{{ cookiecutter.op_name }}, kept local to each shard under a jit with Auto shardings.
    Same arguments; block sizes apply to each device's blocks."""
    arrays = tuple(jnp.asarray(x) for x in operands)
    check_operands(*arrays)
    run = partial(_partitioned_kernel, blocks=blocks)
    return composition.implement(
        implementation,
        IMPLEMENTATION_ENV,
        backend.PLATFORM,
        run,
        {{ cookiecutter.op_name }}_reference,  # XLA partitions plain JAX itself
        *arrays,
        interpret=interpret,
    )


def _partitioned_kernel(
    *operands: jax.Array, blocks: dict[str, int | None], interpret: backend.Interpret
) -> jax.Array:
    if composition.explicitly_sharded(*operands):
        # custom_partitioning cannot run on Explicit mesh axes; the kernel
        # runs per shard there (through shard_map).
        return run_kernel(*operands, **blocks, interpret=interpret)
{%- if cookiecutter.backend == "mosaic_gpu" %}
    if backend.interpreted(interpret, *operands):
        # The GPU interpreter works through ordered io_callbacks, an effect
        # the partitioner's callback cannot hold (it fails inside XLA). Asked
        # of the operands (their mesh's devices), not of this host: a host
        # with one GPU shards over simulated CPU devices, which interpret.
        raise NotImplementedError(
            "{{ cookiecutter.op_name }}: custom_partitioning cannot hold Mosaic GPU's interpreted "
            "kernel: the partitioned op runs compiled on a GPU; on this host call the op itself"
        )
{%- endif %}
    options = (*sorted(blocks.items()), ("interpret", interpret))
    return _partitioned(operands, options)


def _whole(*args: Any) -> jax.Array:
    # What runs when nothing is sharded (and what the partitioner would
    # otherwise gather for). The last argument is the static options.
    *operands, options = args
    return run_kernel(*operands, **dict(options))


def _rule() -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """SHARDING_RULE's factors: one tuple per operand, and the output's."""
    inputs, output = SHARDING_RULE.split("->")
    return [tuple(x.split()) for x in inputs.split(",")], tuple(output.split())


def _partition(
    options: Options, mesh: Mesh | AbstractMesh, arg_shapes: Shapes, result_shape: Shapes
) -> tuple[Mesh | AbstractMesh, Callable[..., jax.Array], Sharding, tuple[Sharding, ...]]:
    operand_factors, output_factors = _rule()
    mesh, specs = _mesh_and_specs(arg_shapes)
    assigned: dict[str, object] = {}  # each factor's mesh axes (a spec entry)
    used: set[str] = set()
    for factors, given in zip(operand_factors, specs, strict=True):
        spec = given + (None,) * len(factors)
        for factor, entry in zip(factors, spec, strict=False):
            if factor in assigned:
                continue  # the first operand that names a factor shards it
            if factor in WHOLE_AXES or set(composition.mesh_axes(entry)) & used:
                # Whole on each device; or on a mesh axis an earlier factor
                # took (a's rows and b's columns on a 1-D mesh): a spec
                # cannot name it twice, so this factor is gathered.
                entry = None
            assigned[factor] = entry
            used |= set(composition.mesh_axes(entry))

    def per_shard(*operands: jax.Array) -> jax.Array:
        return run_kernel(*operands, **dict(options))

    def sharding(factors: tuple[str, ...]) -> NamedSharding:
        return NamedSharding(mesh, P(*(assigned.get(f) for f in factors)))

    operands = tuple(sharding(factors) for factors in operand_factors)
    return mesh, per_shard, sharding(output_factors), operands


def _mesh_and_specs(arg_shapes: Shapes) -> tuple[Mesh | AbstractMesh, list[tuple[Any, ...]]]:
    """The operands' mesh, and each operand's spec over it.

    Where the program names no mesh, the callback gets XLA's own tilings
    (GSPMDShardings) instead of NamedShardings: inside a shard_map that
    leaves some mesh axes free (axis_names=...), each operand's split over
    those, numbered within the group of devices they span; in a program on
    no mesh at all (NumPy inputs, say), whatever XLA chose. They are read as
    JAX itself reads one (GSPMDSharding._to_sdy_sharding), over a mesh of the
    first tiling's own axes (its devices are placeholders: shardings count
    mesh positions), so that each device keeps its blocks. An operand whose
    tiling that mesh does not make (another split of the devices, or devices
    out of iota order) is read as whole: whole operands are always right.
    (JAX has no public reader of an XLA tiling: this one is internal, jax._src.)
    """
    shardings = [shape.sharding for shape in arg_shapes]
    if all(isinstance(s, NamedSharding) for s in shardings):
        return shardings[0].mesh, [tuple(s.spec) for s in shardings]
    devices = sorted(shardings[0].device_set, key=lambda d: d.id)
    tilings = [s.sharding._to_xla_hlo_sharding(len(s.shape)) for s in arg_shapes]
    iota = [t for t in tilings if t.is_tiled() and t.is_tile_assignment_iota()]
    if not iota:
        return Mesh(np.array(devices), ("devices",)), [()] * len(tilings)
    sizes = tuple(iota[0].get_axis_sizes())
    names = tuple(f"tiled_{i}" for i in range(len(sizes)))
    mesh = Mesh(np.array(devices[: math.prod(sizes)]).reshape(sizes), names)

    def spec(tiling: Any) -> tuple[Any, ...]:
        if tiling not in iota or tuple(tiling.get_axis_sizes()) != sizes:
            return ()
        return tuple(parse_flatten_op_sharding(tiling, mesh)[0])

    return mesh, [spec(t) for t in tilings]


_forward = custom_partitioning(_whole, static_argnums=(len(_rule()[0]),))
_forward.def_partition(
    partition=_partition, sharding_rule=SHARDING_RULE, need_replication_factors=WHOLE_AXES
)


# custom_partitioning has no autodiff rule: differentiate through a custom VJP.
@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _partitioned(operands: tuple[jax.Array, ...], options: Options) -> jax.Array:
    y: jax.Array = _forward(*operands, options)
    return y


def _fwd(
    operands: tuple[jax.Array, ...], options: Options
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    return _forward(*operands, options), operands


def _bwd(
    options: Options, operands: tuple[jax.Array, ...], g: jax.Array
) -> tuple[tuple[jax.Array, ...]]:
    _, reference_vjp = jax.vjp({{ cookiecutter.op_name }}_reference, *operands)
    grads: tuple[jax.Array, ...] = reference_vjp(g)
    return (grads,)


_partitioned.defvjp(_fwd, _bwd)
