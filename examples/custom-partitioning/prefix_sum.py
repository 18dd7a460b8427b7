"""Prefix sums along a sharded sequence axis, partitioned by hand with custom_partitioning.

`prefix_sum(x)` is `jnp.cumsum(x, axis=1)` for x of shape (rows, length); `suffix_sum(x)` is
the reverse (right-to-left) cumulative sum. Both are reverse-mode differentiable: the VJP of
a prefix sum is the suffix sum of the cotangent, and the other way round.

Why a custom rule: with the length axis sharded (sequence / context parallelism), XLA's
partitioner all-gathers whole rows onto every device and scans them there. A prefix sum
needs far less. With S shards along the sequence, device s holds block s of every row, and

    prefix_sum(x)[block s] = cumsum(block s) + (sum of the totals of blocks 0 .. s-1)

so each device scans its own block, all-gathers one number per row (its block's total:
(rows, S) values after the gather), and adds the totals of the blocks before it. The suffix
sum is the mirror image: the totals of the blocks after it. Rows are independent, so a
sharded row axis needs no communication at all.

The row axis and the length axis may each be sharded over one mesh axis or several (a tuple in
the PartitionSpec); the rule reads the mesh axis names from the operand's sharding, so it
works on any mesh. A length that does not split evenly falls back to whole rows, see
`_sequence_axes`.

Under Shardy (the default partitioner) each op needs a `sharding_rule`; "r n -> r n" says the
result is sharded like the operand, dimension by dimension. Without one, the op would be
treated as replicated and its input gathered. custom_partitioning has no autodiff or batching
rules, hence the two custom_vjp wrappers at the bottom.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["prefix_sum", "suffix_sum"]


def prefix_sum(x):
    """Inclusive cumulative sum along axis 1 of x (rows, length): `jnp.cumsum(x, axis=1)`.

    The result has x's shape, dtype and sharding. When the length axis is sharded evenly,
    the only communication is an all-gather of one total per row and shard.
    """
    return _prefix_sum(_check(x, "prefix_sum"))


def suffix_sum(x):
    """Inclusive cumulative sum along axis 1 of x (rows, length), from the right:
    `out[:, i] = sum(x[:, i:], axis=1)`. Same sharding and communication as `prefix_sum`."""
    return _suffix_sum(_check(x, "suffix_sum"))


def _check(x, name):
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} expects x of shape (rows, length), got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} expects a floating-point x, got {x.dtype}")
    return x


# --- which mesh axes stay sharded ------------------------------------------------------------


def _mesh_axes_size(mesh, axes):
    """Number of shards along mesh axes given as in a PartitionSpec entry."""
    if axes is None:
        return 1
    names = (axes,) if isinstance(axes, str) else axes
    size = 1
    for name in names:
        size *= mesh.shape[name]
    return size


def _sequence_axes(mesh, spec_entry, length):
    """The mesh axes the length axis stays sharded over, or None to ask for whole rows.

    Whole rows when the length axis is not sharded (or over a single shard), and when the
    length does not split evenly. In the uneven case XLA pads every shard to the same block
    size (ceil(length / S)), so blocks no longer start at s * block, the last real block is
    short, and whole shards may be nothing but padding, whose contents are unspecified. The
    suffix sum would add that padding into the totals it carries leftwards. Asking for whole
    rows lets the partitioner gather them, as it would for jnp.cumsum: correct, just not
    cheaper. (Masking positions >= length inside each block would also work.)
    """
    shards = _mesh_axes_size(mesh, spec_entry)
    if shards == 1 or length % shards:
        return None
    return spec_entry


# --- the per-device computation --------------------------------------------------------------


def _scan_block(x, *, reverse, seq_axes, shards):
    """The result for this device's block x (rows, block), given the length axis is split
    over the mesh axes `seq_axes` into `shards` blocks (seq_axes None: x is whole rows)."""
    local = lax.cumsum(x, axis=1, reverse=reverse)
    if seq_axes is None:
        return local
    # This block's row totals: the last entry of a prefix sum, the first of a suffix sum.
    totals = local[:, 0] if reverse else local[:, -1]
    # (rows, shards), in block order: all_gather and axis_index over a tuple of mesh axes
    # both number the shards the way the PartitionSpec lays the blocks out (major axis first).
    totals = lax.all_gather(totals, seq_axes, axis=1)
    me = lax.axis_index(seq_axes)
    block = jnp.arange(shards)
    carried = block > me if reverse else block < me  # the blocks whose totals add to ours
    carry = jnp.sum(jnp.where(carried, totals, 0), axis=1, keepdims=True)
    return local + carry


def _partition(reverse, mesh, arg_shapes, result_shape):
    """Shardy hands over the sharding it propagated to the operand; return the shardings the
    per-device function works with (the partitioner reshards to them) and that function."""
    del mesh, result_shape  # the result is sharded like the operand, by "r n -> r n"
    (x,) = arg_shapes
    if not isinstance(x.sharding, NamedSharding):
        return _partition_without_mesh(reverse, x.sharding)
    mesh = x.sharding.mesh
    row_axes, length_axes = ((*tuple(x.sharding.spec), None, None))[:2]
    seq_axes = _sequence_axes(mesh, length_axes, x.shape[1])
    # Rows are independent, so the row sharding is kept whatever it is: uneven row shards are
    # padded rows, which are scanned and then dropped.
    sharding = NamedSharding(mesh, P(row_axes, seq_axes))
    per_device = partial(
        _scan_block,
        reverse=reverse,
        seq_axes=seq_axes,
        shards=_mesh_axes_size(mesh, seq_axes),
    )
    return mesh, per_device, sharding, (sharding,)


def _partition_without_mesh(reverse, sharding):
    """Whole, replicated arrays, for a program whose mesh JAX does not know.

    JAX knows the mesh (and hands the callback a NamedSharding, with axis names) only when
    some input, output or sharding constraint of the jitted program is a NamedSharding. A
    program without one still runs on every device of the context mesh, and the callback then
    gets a GSPMDSharding, which has no axis names for the collectives. That happens, e.g., for
    `jit(grad(lambda x: prefix_sum(x).sum()))`: the gradient does not depend on x, so x is
    pruned and the only array left is the cotangent of the sum, a broadcast scalar. Asking for
    replicated operands is always correct, and in such programs the data is replicated anyway.
    """
    devices = sorted(sharding.device_set, key=lambda device: device.id)
    mesh = Mesh(np.array(devices), ("devices",))
    replicated = NamedSharding(mesh, P())
    per_device = partial(_scan_block, reverse=reverse, seq_axes=None, shards=1)
    return mesh, per_device, replicated, (replicated,)


@custom_partitioning
def _prefix_sum_op(x):
    return lax.cumsum(x, axis=1)


@custom_partitioning
def _suffix_sum_op(x):
    return lax.cumsum(x, axis=1, reverse=True)


# r: rows, n: length. Both factors pass through: result dimension i is sharded like operand
# dimension i. Sharding n is allowed because _partition knows how to handle it.
_prefix_sum_op.def_partition(partition=partial(_partition, False), sharding_rule="r n -> r n")
_suffix_sum_op.def_partition(partition=partial(_partition, True), sharding_rule="r n -> r n")


# --- differentiation: each sum's VJP is the other one -----------------------------------------
#
# y = prefix_sum(x) is linear, y_i = sum_{j <= i} x_j, so dL/dx_j = sum_{i >= j} dL/dy_i: the
# suffix sum of the cotangent, and vice versa. No residuals are needed. Since each backward
# rule calls the other custom_vjp function (not the bare op), the backward pass is itself
# differentiable, so reverse mode works to any order (grad of grad, Hessian-vector products).


@jax.custom_vjp
def _prefix_sum(x):
    return _prefix_sum_op(x)


@jax.custom_vjp
def _suffix_sum(x):
    return _suffix_sum_op(x)


def _prefix_sum_fwd(x):
    return _prefix_sum(x), None


def _prefix_sum_bwd(_, cotangent):
    return (_suffix_sum(cotangent),)


def _suffix_sum_fwd(x):
    return _suffix_sum(x), None


def _suffix_sum_bwd(_, cotangent):
    return (_prefix_sum(cotangent),)


_prefix_sum.defvjp(_prefix_sum_fwd, _prefix_sum_bwd)
_suffix_sum.defvjp(_suffix_sum_fwd, _suffix_sum_bwd)
