"""Rung 4, custom partitioning: the op tells XLA's partitioner how to split it.

What it buys: under an auto-sharded jit (jax.set_mesh with AxisType.Auto axes) each device
normalizes its own rows, with no collective, whatever XLA would have decided for the plain op.
The Shardy sharding_rule "b d, d -> b d, b" names the factors: rows (b) may stay sharded, and
need_replication_factors=("d",) says the normalized axis must be whole on each device (a
sharded d would need a psum of the squares; this rule asks XLA to gather it instead).

What it costs: custom_partitioning has no autodiff or batching rules. grad comes from a
custom_vjp whose forward and backward are each a custom_partitioning op; vmap and second
derivatives fail. The only collective left in grad is the sum of dw over the row shards (one
all-reduce of d numbers), which the plain op needs too.
"""

from operator import attrgetter

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

EPS = 1e-6


def _row_axes(sharding):
    """The mesh and the mesh axes x's rows are sharded over (None: not sharded)."""
    if not isinstance(sharding, NamedSharding):  # no mesh named: run whole, replicated
        devices = sorted(sharding.device_set, key=attrgetter("id"))
        return Mesh(np.array(devices), ("devices",)), None
    return sharding.mesh, (*sharding.spec, None)[0]


# --- forward: y and the inverse RMS r, row by row ----------------------------------------


def _forward(x, w):
    r = 1.0 / jnp.sqrt(jnp.mean(x * x, axis=-1) + EPS)  # (rows,)
    return x * r[:, None] * w, r


_forward_op = custom_partitioning(_forward)


def _partition_forward(mesh, arg_shapes, result_shape):
    mesh, rows = _row_axes(arg_shapes[0].sharding)
    row_block, whole = NamedSharding(mesh, P(rows, None)), NamedSharding(mesh, P())
    results = (row_block, NamedSharding(mesh, P(rows)))
    return mesh, _forward, results, (row_block, whole)


_forward_op.def_partition(
    partition=_partition_forward,
    sharding_rule="b d, d -> b d, b",
    need_replication_factors=("d",),
)


# --- backward: dx and each row's share of dw; the sum over rows is left to XLA ----------


def _backward(x, w, r, dy):
    x_hat = x * r[:, None]
    g = dy * w
    dx = r[:, None] * (g - x_hat * jnp.mean(g * x_hat, axis=-1, keepdims=True))
    return dx, dy * x_hat


_backward_op = custom_partitioning(_backward)


def _partition_backward(mesh, arg_shapes, result_shape):
    mesh, rows = _row_axes(arg_shapes[0].sharding)
    row_block, whole = NamedSharding(mesh, P(rows, None)), NamedSharding(mesh, P())
    operands = (row_block, whole, NamedSharding(mesh, P(rows)), row_block)
    return mesh, _backward, (row_block, row_block), operands


_backward_op.def_partition(
    partition=_partition_backward,
    sharding_rule="b d, d, b, b d -> b d, b d",
    need_replication_factors=("d",),
)


# --- the differentiable op -----------------------------------------------------------------


def rms_norm(x, w):
    """x: (rows, d) float32, w: (d,) float32 -> (rows, d). Reverse-mode differentiable."""
    if x.ndim != 2:
        raise ValueError(f"x must have shape (rows, d), got {x.shape}")
    return _rms_norm(x, w)


@jax.custom_vjp
def _rms_norm(x, w):
    return _forward_op(x, w)[0]


def _fwd(x, w):
    y, r = _forward_op(x, w)
    return y, (x, w, r)


def _bwd(residuals, dy):
    dx, dw_rows = _backward_op(*residuals, dy)
    return dx, jnp.sum(dw_rows, axis=0)


_rms_norm.defvjp(_fwd, _bwd)
