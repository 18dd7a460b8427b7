"""The Pallas kernel for GPUs through Triton (deprecated backend): y = x *
factor, row block by row block (the backend's helpers are in backend.py).

TODO: write your kernel here (or in the op module). Each program instance
loads one (block_m, n) tile of rows from global memory into registers,
computes on it, and stores the output tile.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from .backend import Interpret, interpreted, native_or_interpreted, refuse_varying
from .composition import vary_alike

# Rows per block: a power of two.
DEFAULT_BLOCK_M = 16
COMPILER_PARAMS = plt.CompilerParams(num_warps=4, num_stages=1)


def check_block(name: str, block: tuple[int, ...], array_shape: tuple[int, ...]) -> None:
    """Triton needs every array in the kernel to have power-of-two sizes."""
    for size in block:
        if size < 1 or size & (size - 1):
            raise ValueError(
                f"block {block} of {name} {tuple(array_shape)} is invalid on Triton: "
                f"every block size must be a power of two, got {size}"
            )


def scale(x: jax.Array, factor: float, *, block_m: int, interpret: Interpret = None) -> jax.Array:
    """x (m, n) * factor, computed in float32, in the dtype of x."""
    m, n = x.shape
    if not all(isinstance(d, int) for d in (m, n)):
        # jax.export's symbolic sizes: Pallas on GPUs cannot size a grid
        # symbolically (jax-ml/jax#24960).
        raise NotImplementedError(
            f"the kernel: symbolic sizes {(m, n)}: Pallas cannot size the Triton kernel's "
            "grid dynamically; export with concrete shapes"
        )
    bm = min(block_m, m)
    check_block("x", (bm, n), x.shape)
    (x,), varying = vary_alike([x])
    if varying.varying and interpreted(interpret):
        refuse_varying(varying.varying)
    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    call = functools.partial(
        pl.pallas_call,
        functools.partial(_kernel, factor=factor),
        grid=(pl.cdiv(m, bm),),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype, manual_axis_type=varying),
        compiler_params=COMPILER_PARAMS,
    )
    if interpret is None:
        out: jax.Array = native_or_interpreted(
            lambda x: call(interpret=False)(x), lambda x: call(interpret=True)(x), x
        )
        return out
    result: jax.Array = call(interpret=interpret)(x)
    return result


def _kernel(x_ref: jax.Ref, y_ref: jax.Ref, *, factor: float) -> None:
    y_ref[...] = (x_ref[...].astype(jnp.float32) * factor).astype(y_ref.dtype)
