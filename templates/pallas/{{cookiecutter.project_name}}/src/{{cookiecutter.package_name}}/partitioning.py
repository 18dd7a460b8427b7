"""{{ cookiecutter.op_name }} for jit with Auto shardings: a custom_partitioning rule.

XLA's partitioner cannot see into a Pallas kernel. Give it a sharded operand
and it all-gathers every operand onto every device and runs the whole kernel
there: correct, but each device does all the work and holds all the data.
{{ cookiecutter.op_name }}_partitioned tells it what the kernel can do per shard instead:

- rows of a (m) and columns of b and bias (n) may stay sharded: each output
  tile needs only its rows of a and its columns of b, so every device runs the
  kernel on its own blocks with no communication;
- the contracted axis k must be whole on each device (the GELU after the sum
  cannot run on partial sums): if it arrives sharded, the partitioner gathers
  it, as the rule's need_replication_factors says.

Under Shardy (JAX's partitioner) that is the sharding_rule below, an einsum-like
"m k, k n, n -> m n". Limits of custom_partitioning on JAX 0.12: no autodiff
rule (so this is a jax.custom_vjp around it), no vmap, no jax.export (export
{{ cookiecutter.op_name }} itself) and no Explicit mesh axes (there this calls {{ cookiecutter.op_name }},
which runs the kernel per shard through shard_map).

The backward here is the reference's VJP, which XLA partitions on its own
(da = dz @ b^T per row shard; db = a^T @ dz ends in an all-reduce over the
row shards, as any data-parallel weight gradient does). To run the backward
kernels per shard too, give each of the two matmuls its own
custom_partitioning op: "m n, k n -> m k" with n replicated, and "m k, m n -> k n",
which sums over m: psum over the row axes inside the per-shard function.
"""

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AbstractMesh, Mesh, NamedSharding, Sharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import kernel
from .reference import {{ cookiecutter.op_name }}_reference

# isort: split
from .{{ cookiecutter.op_name }} import (
    Implementation,
    _check_operands,
    _explicitly_sharded,
    _mesh_axes,
    kernel_only,
    resolve_implementation,
)

# What custom_partitioning passes a partition callback: abstract arrays with
# their shardings, one per operand.
type Shapes = tuple[jax.ShapeDtypeStruct, ...]
# {{ cookiecutter.op_name }}'s keyword arguments, as a hashable (static) tuple of pairs.
type Options = tuple[tuple[str, object], ...]


def {{ cookiecutter.op_name }}_partitioned(
    a: ArrayLike,
    b: ArrayLike,
    bias: ArrayLike,
    *,
    implementation: Implementation = "auto",
    block_m: int | None = None,
    block_n: int | None = None,
    block_k: int | None = None,
    interpret: kernel.Interpret = None,
) -> jax.Array:
    """{{ cookiecutter.op_name }}, kept local to each shard under a jit with Auto shardings.
    Same arguments; block sizes apply to each device's blocks."""
    a, b, bias = jnp.asarray(a), jnp.asarray(b), jnp.asarray(bias)
    _check_operands(a, b, bias)
    choice = resolve_implementation(implementation)
    if choice == "reference":
        return {{ cookiecutter.op_name }}_reference(a, b, bias)  # XLA partitions plain JAX itself
    run = partial(
        _partitioned_kernel, block_m=block_m, block_n=block_n, block_k=block_k, interpret=interpret
    )
    if choice == "kernel":
        return run(a, b, bias)
    # "auto": per lowering platform, as in {{ cookiecutter.op_name }}.
    native = partial(run, interpret=False if interpret is None else interpret)
    branches = {kernel.PLATFORM: native}
    reference = {{ cookiecutter.op_name }}_reference
    result: jax.Array = jax.lax.platform_dependent(a, b, bias, **branches, default=reference)
    return result


def _partitioned_kernel(
    a: jax.Array,
    b: jax.Array,
    bias: jax.Array,
    *,
    block_m: int | None,
    block_n: int | None,
    block_k: int | None,
    interpret: kernel.Interpret,
) -> jax.Array:
    if _explicitly_sharded(a, b, bias):
        # custom_partitioning cannot run on Explicit mesh axes; the kernel
        # runs per shard there (through shard_map).
        return kernel_only(
            a, b, bias, block_m=block_m, block_n=block_n, block_k=block_k, interpret=interpret
        )
{%- if cookiecutter.backend == "mosaic_gpu" %}
    if kernel.interpreted(interpret):
        # The GPU interpreter works through ordered io_callbacks, an effect
        # the partitioner's callback cannot hold (it fails inside XLA).
        raise NotImplementedError(
            "{{ cookiecutter.op_name }}: custom_partitioning cannot hold Mosaic GPU's interpreted kernel: "
            "{{ cookiecutter.op_name }}_partitioned runs compiled on a GPU; on this host call {{ cookiecutter.op_name }}"
        )
{%- endif %}
    options = (("block_m", block_m), ("block_n", block_n), ("block_k", block_k))
    return _partitioned(a, b, bias, (*options, ("interpret", interpret)))


@partial(custom_partitioning, static_argnums=(3,))
def _forward(a: jax.Array, b: jax.Array, bias: jax.Array, options: Options) -> jax.Array:
    # What runs when nothing is sharded (and what the partitioner would
    # otherwise gather for).
    return kernel_only(a, b, bias, **dict(options))  # type: ignore[arg-type]


def _partition(
    options: Options, mesh: Mesh | AbstractMesh, arg_shapes: Shapes, result_shape: Shapes
) -> tuple[Mesh | AbstractMesh, Callable[..., jax.Array], Sharding, tuple[Sharding, ...]]:
    a_sharding, b_sharding = arg_shapes[0].sharding, arg_shapes[1].sharding
    if isinstance(a_sharding, NamedSharding) and isinstance(b_sharding, NamedSharding):
        mesh = a_sharding.mesh
        rows = (tuple(a_sharding.spec) + (None,))[0]
        cols = (tuple(b_sharding.spec) + (None, None))[1]
        if set(_mesh_axes(rows)) & set(_mesh_axes(cols)):
            # Rows and columns on one mesh axis (the usual layout on a 1-D
            # mesh): the output tile cannot be split by both, and a spec naming
            # the axis twice is invalid. Keep the rows split; gather b's columns.
            cols = None
    else:
        # No mesh named (say, NumPy inputs): whole, replicated operands are
        # always right.
        devices = sorted(a_sharding.device_set, key=lambda d: d.id)
        mesh, rows, cols = Mesh(np.array(devices), ("devices",)), None, None

    def per_shard(a: jax.Array, b: jax.Array, bias: jax.Array) -> jax.Array:
        return kernel_only(a, b, bias, **dict(options))  # type: ignore[arg-type]

    def sharding(*spec: object) -> NamedSharding:
        return NamedSharding(mesh, P(*spec))

    operands = (sharding(rows, None), sharding(None, cols), sharding(cols))
    return mesh, per_shard, sharding(rows, cols), operands


_forward.def_partition(
    partition=_partition,
    sharding_rule="m k, k n, n -> m n",
    need_replication_factors=("k",),
)


# custom_partitioning has no autodiff rule: differentiate through a custom VJP.
@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _partitioned(a: jax.Array, b: jax.Array, bias: jax.Array, options: Options) -> jax.Array:
    y: jax.Array = _forward(a, b, bias, options)
    return y


def _fwd(
    a: jax.Array, b: jax.Array, bias: jax.Array, options: Options
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    return _forward(a, b, bias, options), (a, b, bias)


def _bwd(
    options: Options, residuals: tuple[jax.Array, jax.Array, jax.Array], g: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    _, reference_vjp = jax.vjp({{ cookiecutter.op_name }}_reference, *residuals)
    grads: tuple[jax.Array, jax.Array, jax.Array] = reference_vjp(g)
    return grads


_partitioned.defvjp(_fwd, _bwd)
