"""The Pallas kernel for TPU (Mosaic TPU): y = x * factor, row block by row
block (the backend's helpers are in backend.py).

TODO: write your kernel here (or in the op module). Each grid step the
BlockSpec copies one (block_m, n) tile of rows from HBM into VMEM, the body
computes on it there, and the output tile is copied back.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .backend import Interpret, check_block, interpreter_for, native_or_interpreted
from .composition import vary_alike

# Rows per block: a multiple of 8 (TPU tiles memory as (8, 128)).
DEFAULT_BLOCK_M = 8


def scale(x: jax.Array, factor: float, *, block_m: int, interpret: Interpret = None) -> jax.Array:
    """x (m, n) * factor, computed in float32, in the dtype of x."""
    m, n = x.shape
    # A symbolic m (jax.export) cannot be compared with a block: keep it.
    sizes: tuple[object, ...] = (m,)
    bm = min(block_m, m) if isinstance(sizes[0], int) else block_m
    check_block("x", (bm, n), x.shape)
    (x,), varying = vary_alike([x])
    interpreter = interpreter_for(varying)
    if interpret is True:
        interpret = interpreter
    # jnp.int32(0), not 0: under jax_enable_x64 a Python int lowers as int64,
    # which Mosaic refuses in an index map ("failed to legalize operation
    # 'func.return'"); the grid index is int32.
    spec = pl.BlockSpec((bm, n), lambda i: (i, jnp.int32(0)))
    call = functools.partial(
        pl.pallas_call,
        functools.partial(_kernel, factor=factor),
        grid=(pl.cdiv(m, bm),),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype, manual_axis_type=varying),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )
    if interpret is None:
        out: jax.Array = native_or_interpreted(
            lambda x: call(interpret=False)(x), lambda x: call(interpret=interpreter)(x), x
        )
        return out
    result: jax.Array = call(interpret=interpret)(x)
    return result


def _kernel(x_ref: jax.Ref, y_ref: jax.Ref, *, factor: float) -> None:
    # Rows past the edge of m are computed but never written back.
    y_ref[...] = (x_ref[...].astype(jnp.float32) * factor).astype(y_ref.dtype)
