"""Row-wise softmax as a Pallas TPU kernel, differentiable through a custom VJP.

Each grid step copies a (block_m, n) tile of rows into VMEM, whole along the
row, and writes their softmax: the row's max, exp and sum never leave VMEM.
The backward is a second kernel on the saved output y:
dx = y * (g - sum(g * y)), row by row.

Around the kernels, as in the starter (composition.py): implementation="auto"
| "kernel" | "reference" (IMPLEMENTATION_ENV overrides it), chosen per
lowering platform; under Explicit mesh axes the kernel runs per row shard
through jax.shard_map; partitioning.py builds the custom_partitioning rule
from SHARDING_RULE and WHOLE_AXES below.
"""

import functools
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import backend, composition
from .reference import softmax_reference

DTYPES = (jnp.float32, jnp.bfloat16)
# Rows shard with no communication; each row must be whole on one device.
SHARDING_RULE = "m n -> m n"
WHOLE_AXES = ("n",)
BACKWARD = "kernel"
DEFAULT_BLOCK_M = 128

IMPLEMENTATION_ENV = "ADAPTED_SOFTMAX_IMPLEMENTATION"


def softmax(
    x: ArrayLike,
    *,
    implementation: composition.Implementation = "auto",
    block_m: int | None = None,
    interpret: backend.Interpret = None,
) -> jax.Array:
    """Softmax over the last axis of x (m, n), in the dtype of x."""
    x = jnp.asarray(x)
    check_operands(x)
    run = partial(kernel_only, block_m=block_m)
    return composition.implement(
        implementation,
        IMPLEMENTATION_ENV,
        backend.PLATFORM,
        run,
        softmax_reference,
        x,
        interpret=interpret,
    )


def kernel_only(
    x: jax.Array, *, block_m: int | None = None, interpret: backend.Interpret = None
) -> jax.Array:
    """The kernel, whatever IMPLEMENTATION_ENV says, on a checked operand."""
    again = partial(kernel_only, block_m=block_m)
    if composition.explicitly_sharded(x):
        return _per_shard(partial(again, interpret=interpret), x)
    if interpret is None:
        return backend.native_or_interpreted(
            partial(again, interpret=False), partial(again, interpret=True), x
        )
    bm: object = DEFAULT_BLOCK_M if block_m is None else block_m
    if not isinstance(bm, int) or bm < 1:
        raise ValueError(f"block_m must be a positive int, got {bm!r}")
    # A symbolic m (jax.export) cannot be compared with a block: keep it.
    m: object = x.shape[0]
    bm = min(bm, m) if isinstance(m, int) else bm
    backend.check_block("x", (bm, x.shape[1]), x.shape)
    return _differentiable(x, bm, interpret)


def check_operands(x: jax.Array) -> None:
    if x.ndim != 2:
        raise ValueError(f"expected x (m, n), got shape {x.shape}")
    if x.dtype not in DTYPES:
        raise TypeError(f"x must be float32 or bfloat16, got {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"empty operand: x {x.shape}")


# --- the kernels ---------------------------------------------------------------------


def _rows(
    body: Callable[..., None], operands: list[jax.Array], bm: int, interpret: backend.Interpret
) -> jax.Array:
    """body over (bm, n) row tiles of the operands, one output of their shape."""
    (m, n), dtype = operands[0].shape, operands[0].dtype
    operands, varying = composition.vary_alike(operands)
    interpreter = backend.interpreter_for(varying)
    if interpret is True:
        interpret = interpreter
    # jnp.int32(0), not 0: under jax_enable_x64 a Python int lowers as int64,
    # which Mosaic refuses in an index map ("failed to legalize operation
    # 'func.return'"); the grid index is int32.
    spec = pl.BlockSpec((bm, n), lambda i: (i, jnp.int32(0)))
    call = functools.partial(
        pl.pallas_call,
        body,
        grid=(pl.cdiv(m, bm),),
        in_specs=[spec] * len(operands),
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((m, n), dtype, manual_axis_type=varying),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )
    if interpret is None:
        out: jax.Array = backend.native_or_interpreted(
            lambda *x: call(interpret=False)(*x),
            lambda *x: call(interpret=interpreter)(*x),
            *operands,
        )
        return out
    result: jax.Array = call(interpret=interpret)(*operands)
    return result


def _forward_kernel(x_ref: jax.Ref, y_ref: jax.Ref) -> None:
    # Rows past the edge of m are computed but never written back.
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    y_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(y_ref.dtype)


def _backward_kernel(y_ref: jax.Ref, g_ref: jax.Ref, dx_ref: jax.Ref) -> None:
    y, g = y_ref[...].astype(jnp.float32), g_ref[...].astype(jnp.float32)
    dx = y * (g - jnp.sum(g * y, axis=-1, keepdims=True))
    dx_ref[...] = dx.astype(dx_ref.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _differentiable(x: jax.Array, bm: int, interpret: backend.Interpret) -> jax.Array:
    return _forward(x, bm, interpret)


def _forward(x: jax.Array, bm: int, interpret: backend.Interpret) -> jax.Array:
    rows = partial(_rows, _forward_kernel, bm=bm, interpret=interpret)
    y: jax.Array = composition.batches_per_shard(lambda x: rows([x]))(x)
    return y


def _fwd(x: jax.Array, bm: int, interpret: backend.Interpret) -> tuple[jax.Array, jax.Array]:
    y = _forward(x, bm, interpret)
    return y, y


def _bwd(bm: int, interpret: backend.Interpret, y: jax.Array, g: jax.Array) -> tuple[jax.Array]:
    backward = partial(_rows, _backward_kernel, bm=bm, interpret=interpret)
    per_shard = composition.batches_per_shard(lambda y, g: backward([y, g]))
    dx: jax.Array = per_shard(y, g.astype(y.dtype))
    return (dx,)


_differentiable.defvjp(_fwd, _bwd)


# --- sharding: one kernel per row shard ----------------------------------------------


def _per_shard(local: Callable[..., jax.Array], x: jax.Array) -> jax.Array:
    rows, cols = (tuple(jax.typeof(x).sharding.spec) + (None, None))[:2]
    if cols is not None:
        raise ValueError(
            f"the row axis n is sharded ({P(rows, cols)}): the kernel needs each row whole "
            "on one device; jax.sharding.reshard it first"
        )
    return composition.per_shard(local, (P(rows, None),), P(rows, None), x)
