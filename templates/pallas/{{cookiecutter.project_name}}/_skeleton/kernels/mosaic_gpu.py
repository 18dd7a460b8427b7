"""The Pallas kernel for NVIDIA Hopper GPUs (Mosaic GPU): y = x * factor, row
block by row block (the backend's helpers are in backend.py).

TODO: write your kernel here (or in the op module). One thread block per
(block_m, n) tile of rows: the TMA copies the tile from GMEM into SMEM, the
threads compute on it and write the result to SMEM, and the TMA stores it.

Interpret mode (plgpu.InterpretGPUParams) runs this same kernel on the CPU,
simulating GMEM, SMEM, the TMA and the barriers.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from .backend import Interpret, Ref, refuse_several_devices, resolve_interpret
from .composition import vary_alike

# Rows per block (each thread block's tile).
DEFAULT_BLOCK_M = 64


def check_block(name: str, block: tuple[int, ...], array: jax.Array) -> None:
    """The TMA copies rows of whole 16 bytes: 8 bfloat16, 4 float32."""
    if block[-1] * array.dtype.itemsize % 16:
        raise ValueError(
            f"block {tuple(block)} of {name} {tuple(array.shape)} {array.dtype} is invalid on "
            f"Mosaic GPU: its rows must be whole multiples of 16 bytes, got {block[-1]} elements"
        )


def scale(x: jax.Array, factor: float, *, block_m: int, interpret: Interpret = None) -> jax.Array:
    """x (m, n) * factor, computed in float32, in the dtype of x."""
    m, n = x.shape
    if not all(isinstance(d, int) for d in (m, n)):
        # jax.export's symbolic sizes: Mosaic GPU's lowering cannot take a
        # symbolic grid (jax-ml/jax#24960).
        raise NotImplementedError(
            f"the kernel: symbolic sizes {(m, n)}: Mosaic GPU cannot lower a symbolic grid; "
            "export with concrete shapes"
        )
    interpret = resolve_interpret(interpret, x)
    if interpret:
        refuse_several_devices()
    bm = min(block_m, m)
    check_block("x", (bm, n), x)
    mp = -(-m // bm) * bm  # padded to whole blocks, sliced back below
    x = jnp.pad(x, ((0, mp - m), (0, 0))) if mp != m else x
    (x,), varying = vary_alike([x])
    padded: jax.Array = plgpu.kernel(
        functools.partial(_kernel, block_m=bm, factor=factor),
        out_type=jax.ShapeDtypeStruct((mp, n), x.dtype, manual_axis_type=varying),
        grid=(mp // bm,),
        grid_names=("m",),
        kernel_name="scale",
        interpret=interpret,
    )(x)
    return padded[:m] if mp != m else padded


def _kernel(x_gmem: Ref, y_gmem: Ref, *, block_m: int, factor: float) -> None:
    rows = pl.ds(jax.lax.axis_index("m") * block_m, block_m)

    def scoped(x_smem: Ref, y_smem: Ref, barrier: Ref) -> None:
        plgpu.copy_gmem_to_smem(x_gmem.at[rows], x_smem, barrier)
        plgpu.barrier_wait(barrier)
        y_smem[...] = (x_smem[...].astype(jnp.float32) * factor).astype(y_smem.dtype)
        plgpu.commit_smem()  # make the threads' SMEM writes visible to the TMA
        plgpu.copy_smem_to_gmem(y_smem, y_gmem.at[rows])
        plgpu.wait_smem_to_gmem(0)

    shape = (block_m, x_gmem.shape[1])
    pl.run_scoped(
        scoped,
        plgpu.SMEM(shape, x_gmem.dtype),
        plgpu.SMEM(shape, y_gmem.dtype),
        plgpu.Barrier(),
    )
