"""The Pallas kernel for NVIDIA GPUs (Mosaic GPU): a tiled matmul on Hopper's
tensor cores with an optional fused bias + GELU epilogue.

Target: Hopper (sm_90a: H100, H200). The multiply is WGMMA, the warpgroup
matrix-multiply-accumulate that exists on sm_90a only: Blackwell (sm_100a)
replaced it with tcgen05 MMAs that accumulate in tensor memory
(plgpu.tcgen05_mma), so a Blackwell port swaps the main loop's multiply and
keeps the rest.

Memory hierarchy, from slow to fast:

- GMEM (HBM): a, b, bias and the outputs.
- SMEM (shared memory, up to 227 KiB per thread block): at each step of the
  k loop the TMA (Tensor Memory Accelerator, the copy engine in each SM)
  copies one (block_m, block_k) tile of a and one (block_k, block_n) tile of b
  from GMEM into SMEM, with no thread spending time on it. The tiles sit in a
  ring of 2-4 slots (plgpu.emit_pipeline), so the copies for the next k steps
  are in flight while the tensor cores work on this one; a barrier per slot
  says when its copy has landed. Tiles are stored as (8 rows x 128 bytes)
  tiles with a 128-byte swizzle: the layout the WGMMA descriptors read without
  SMEM bank conflicts.
- Registers: the float32 (block_m, block_n) accumulator lives in the
  registers of one warpgroup (4 warps, 128 threads). WGMMA is issued by the
  whole warpgroup, reads both operands straight from SMEM and runs
  asynchronously; at most one is left in flight, so that the slot the
  previous one read can be refilled.
- The epilogue works on the accumulator in registers: + bias (loaded straight
  into registers), GELU, cast; then it writes the tile to SMEM and the TMA
  stores it to GMEM. That is the fusion XLA may not give you.

How the blocks map onto the GPU: one thread block (CTA) per (block_m,
block_n) output tile, on a (m / block_m, n / block_n) grid that the GPU
spreads over its SMs; the k axis is a loop inside the block (on TPU it is a
grid axis), as the accumulator must stay in one warpgroup's registers.
block_m is whole 64-row WGMMA instructions, block_n is WGMMA's N (at most
256), and every block dimension is whole 128-byte swizzle rows of bfloat16.
128x128 float32 is as large an accumulator as one warpgroup holds (128
registers per thread); larger output tiles need more consumer warpgroups.

Edges: the operands are zero-padded to whole blocks and the output is sliced
back, so no tile needs masking (zeros add nothing to the sums). The TMA can
zero-fill out-of-bounds reads itself, but only when every row starts 16-byte
aligned, which ragged shapes such as k=383 break; padding always works, at the
cost of a copy of the operands when the shapes are ragged.

float32 operands run on the tensor cores as TF32 (10-bit mantissa), as XLA's
default precision allows for float32 matmuls on GPU: on the device, float32
results match a float32 reference to about 1e-3, not to float32's 1e-7 (the
native test uses bfloat16). TF32 WGMMA reads both operands K-major only, so
float32 operands are transposed in GMEM (by XLA) when they are not; bfloat16
WGMMA reads transposed tiles from SMEM at no cost.

Interpret mode (plgpu.InterpretGPUParams) runs this same kernel on the CPU,
simulating GMEM, SMEM, the TMA, the barriers and WGMMA: what the tests
interpret is what lowers for the GPU. It does not model the hardware's
limits, so matmul checks registers and SMEM itself before compiling.
"""

import functools
from typing import Literal, TypeAlias, overload

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from .backend import Interpret, Ref, refuse_several_devices, resolve_interpret
from .composition import vary_alike

# The largest accumulator one warpgroup holds (128x128 float32: 128 registers
# per thread); block_k=64 is one 128-byte swizzle row of bfloat16 and leaves
# SMEM for 4 pipeline slots in bfloat16, 3 in float32.
DEFAULT_BLOCKS = {"block_m": 128, "block_n": 128, "block_k": 64}
# What the tuner (python -m <package>.tune) tries: (block_m, block_n, block_k).
# block_m * block_n stays within one warpgroup's registers (at most 128 * 128).
TUNING_CANDIDATES = [
    (128, 128, 64),
    (64, 128, 64),
    (128, 64, 64),
    (128, 128, 128),
    (64, 256, 64),
    (64, 128, 128),
]


def default_blocks(m: object, k: object, n: object, itemsize: int) -> dict[str, int]:
    """Blocks for a call no block table knows: DEFAULT_BLOCKS, whatever the sizes.
    (The TPU kernel chooses by the chip's VMEM; here shared memory and registers
    bound the tiles, and the tuner is the way to larger ones.)"""
    return DEFAULT_BLOCKS


# Every block dimension is a multiple of 64: WGMMA's instruction covers 64
# rows (M), and a 128-byte swizzle row holds 64 bfloat16 (32 float32)
# elements, whichever of K, M or N is a tile's contiguous dimension.
_UNIT = 64
_SWIZZLE = 128  # bytes
_MAX_BLOCK_N = 256  # WGMMA's largest N
# What one warpgroup's registers hold: 128 float32 accumulators per thread.
_MAX_ACCUMULATOR = 128 * 128
_SMEM_BYTES = 227 * 1024  # the most SMEM one thread block can have on Hopper
_MAX_STAGES = 4

Activation: TypeAlias = Literal["gelu"] | None


def check_block(name: str, block: tuple[int, ...], array_shape: tuple[int, ...]) -> None:
    """WGMMA and the swizzled SMEM layout need every block dimension to be a
    multiple of 64, and the output block's columns (WGMMA's N) to be at most
    256. Unlike TPU, a block spanning the whole array is no exception: edges
    are padded to whole blocks."""
    for axis, size in enumerate(block):
        if size % _UNIT:
            raise ValueError(
                f"block {tuple(block)} of {name} {tuple(array_shape)} is invalid on Mosaic "
                f"GPU: dimension {axis - len(block)} must be a multiple of {_UNIT}, got {size}"
            )
    if name == "output" and block[-1] > _MAX_BLOCK_N:
        raise ValueError(
            f"block {tuple(block)} of {name} {tuple(array_shape)} is invalid on Mosaic GPU: "
            f"WGMMA computes at most {_MAX_BLOCK_N} columns, got {block[-1]}"
        )


@overload
def matmul(
    a: jax.Array,
    b: jax.Array,
    bias: jax.Array | None,
    *,
    block_m: int,
    block_n: int,
    block_k: int,
    activation: Activation,
    transpose_a: bool = ...,
    transpose_b: bool = ...,
    return_preactivation: Literal[False] = ...,
    interpret: Interpret = ...,
) -> jax.Array: ...
@overload
def matmul(
    a: jax.Array,
    b: jax.Array,
    bias: jax.Array | None,
    *,
    block_m: int,
    block_n: int,
    block_k: int,
    activation: Activation,
    transpose_a: bool = ...,
    transpose_b: bool = ...,
    return_preactivation: Literal[True],
    interpret: Interpret = ...,
) -> tuple[jax.Array, jax.Array]: ...
def matmul(
    a: jax.Array,
    b: jax.Array,
    bias: jax.Array | None,
    *,
    block_m: int,
    block_n: int,
    block_k: int,
    activation: Activation,
    transpose_a: bool = False,
    transpose_b: bool = False,
    return_preactivation: bool = False,
    interpret: Interpret = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """op(a) @ op(b) [+ bias] [-> gelu], where op transposes when asked.

    Returns the output, and also the float32 pre-activation when asked (the
    backward pass needs it). Blocks are clamped to the (64-rounded) array and
    validated before anything is lowered. interpret: None (native on a GPU,
    interpreted elsewhere), True, False, or a plgpu.InterpretGPUParams.
    """
    m, k = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    if not all(isinstance(d, int) for d in (m, n, k)):
        # jax.export's symbolic sizes: Mosaic GPU's lowering cannot take a
        # symbolic grid (jax-ml/jax#24960).
        raise NotImplementedError(
            f"the kernel: symbolic sizes {(m, k, n)}: Mosaic GPU cannot lower a symbolic "
            "grid; export with concrete shapes"
        )
    # Shrink blocks to small arrays, but only down to whole 64s.
    bm, bn, bk = (
        min(blk, _round_up(d, _UNIT)) for blk, d in ((block_m, m), (block_n, n), (block_k, k))
    )
    check_block("a", (bk, bm) if transpose_a else (bm, bk), a.shape)
    check_block("b", (bn, bk) if transpose_b else (bk, bn), b.shape)
    check_block("output", (bm, bn), (m, n))
    interpret = resolve_interpret(interpret, a, b)
    stages = _stages(bm, bn, bk, a.dtype)
    if not interpret:
        _check_resources(bm, bn, bk, a.dtype, return_preactivation, stages)
    if a.dtype == jnp.float32:
        # TF32 WGMMA has no transposed operands: make both K-major in GMEM.
        a, transpose_a = (a.T, False) if transpose_a else (a, False)
        b, transpose_b = (b, True) if transpose_b else (b.T, True)
    mp, np_, kp = _round_up(m, bm), _round_up(n, bn), _round_up(k, bk)
    a = _pad(a, (kp, mp) if transpose_a else (mp, kp))
    b = _pad(b, (np_, kp) if transpose_b else (kp, np_))
    operands = [a, b]
    if bias is not None:
        operands.append(_pad(bias, (np_,)))

    if interpret:
        refuse_several_devices()
    operands, varying = vary_alike(operands)
    out_type = [jax.ShapeDtypeStruct((mp, np_), a.dtype, manual_axis_type=varying)]
    if return_preactivation:
        out_type.append(jax.ShapeDtypeStruct((mp, np_), jnp.float32, manual_axis_type=varying))
    body = functools.partial(
        _kernel,
        blocks=(bm, bn, bk),
        k_steps=kp // bk,
        stages=stages,
        has_bias=bias is not None,
        activation=activation,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )
    padded: list[jax.Array] = plgpu.kernel(
        body,
        out_type=out_type,
        grid=(mp // bm, np_ // bn),
        grid_names=("m", "n"),
        kernel_name="matmul",
        interpret=interpret,
    )(*operands)
    outputs = [out[:m, :n] if (mp, np_) != (m, n) else out for out in padded]
    return (outputs[0], outputs[1]) if return_preactivation else outputs[0]


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _pad(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    widths = [(0, full - size) for size, full in zip(x.shape, shape, strict=True)]
    return jnp.pad(x, widths) if any(w for _, w in widths) else x


def _stages(bm: int, bn: int, bk: int, dtype: jnp.dtype) -> int:
    """As many pipeline slots as fit SMEM (at least 2, so that the TMA
    refills one slot while WGMMA reads the other), up to 4."""
    step_bytes = (bm * bk + bk * bn) * jnp.dtype(dtype).itemsize
    return max(2, min(_MAX_STAGES, _SMEM_BYTES // step_bytes))


def _check_resources(
    bm: int, bn: int, bk: int, dtype: jnp.dtype, return_preactivation: bool, stages: int
) -> None:
    """Limits of the hardware that interpret mode does not model: refuse
    blocks that cannot fit before Mosaic GPU tries to compile them."""
    blocks = (bm, bn, bk)
    if bm * bn > _MAX_ACCUMULATOR:
        raise ValueError(
            f"blocks {blocks} are invalid on Mosaic GPU: a {bm}x{bn} float32 accumulator "
            f"needs {bm * bn // 128} registers per thread of the warpgroup, more than "
            f"{_MAX_ACCUMULATOR // 128}; make block_m * block_n at most {_MAX_ACCUMULATOR}"
        )
    itemsize = jnp.dtype(dtype).itemsize
    # The pipeline's slots and the epilogue's output tiles take turns in the
    # same SMEM.
    pipeline = stages * (bm * bk + bk * bn) * itemsize
    epilogue = bm * bn * (itemsize + (4 if return_preactivation else 0))
    needed = max(pipeline, epilogue)
    if needed > _SMEM_BYTES:
        raise ValueError(
            f"blocks {blocks} are invalid on Mosaic GPU for {jnp.dtype(dtype).name}: they "
            f"need {needed // 1024} KiB of shared memory, more than the "
            f"{_SMEM_BYTES // 1024} KiB of a thread block; use smaller blocks"
        )


def _smem_transforms(dtype: jnp.dtype) -> tuple[plgpu.TilingTransform, plgpu.SwizzleTransform]:
    """The SMEM layout WGMMA reads: (8, 128 bytes) tiles, 128-byte swizzled."""
    row = _SWIZZLE // jnp.dtype(dtype).itemsize
    # JAX declares both transforms as implementing a Protocol method they do
    # not define, so the type checker takes them for abstract; they are not.
    tiling = plgpu.TilingTransform((8, row))  # type: ignore[abstract]
    return (tiling, plgpu.SwizzleTransform(_SWIZZLE))  # type: ignore[abstract]


def _kernel(
    a_gmem: Ref,
    b_gmem: Ref,
    *refs: Ref,
    blocks: tuple[int, int, int],
    k_steps: int,
    stages: int,
    has_bias: bool,
    activation: Activation,
    transpose_a: bool,
    transpose_b: bool,
) -> None:
    bias_gmem = refs[0] if has_bias else None
    out_gmem = refs[int(has_bias) :]
    bm, bn, bk = blocks
    i, j = jax.lax.axis_index("m"), jax.lax.axis_index("n")
    rows, cols = pl.ds(i * bm, bm), pl.ds(j * bn, bn)

    def mainloop(acc_ref: Ref) -> jax.Array:
        def step(_: object, a_smem: Ref, b_smem: Ref) -> None:
            # The transposes are views: the WGMMA descriptors read the tile
            # in whichever order it was stored.
            a_tile = a_smem.T if transpose_a else a_smem
            b_tile = b_smem.T if transpose_b else b_smem
            plgpu.wgmma(acc_ref, a_tile, b_tile)
            # Let this WGMMA run on while the next step starts, but make sure
            # the previous one is done: its slot is the one refilled next.
            plgpu.wgmma_wait(1)

        transforms = _smem_transforms(a_gmem.dtype)
        # delay_release=1: a slot is refilled one step late, once the WGMMA
        # that read it has been waited for.
        spec = functools.partial(plgpu.BlockSpec, transforms=transforms, delay_release=1)
        if transpose_a:
            a_spec = spec((bk, bm), lambda kk: (kk, i))
        else:
            a_spec = spec((bm, bk), lambda kk: (i, kk))
        if transpose_b:
            b_spec = spec((bn, bk), lambda kk: (j, kk))
        else:
            b_spec = spec((bk, bn), lambda kk: (kk, j))
        plgpu.emit_pipeline(
            step, grid=(k_steps,), in_specs=[a_spec, b_spec], max_concurrent_steps=stages
        )(a_gmem, b_gmem)
        z: jax.Array = acc_ref[...]  # waits for the last WGMMA
        return z

    z: jax.Array = pl.run_scoped(mainloop, plgpu.WGMMAAccumulatorRef((bm, bn), jnp.float32))
    # The epilogue, on the accumulator in registers.
    if bias_gmem is not None:
        # Straight from GMEM into registers, each thread taking the columns
        # of the accumulator it holds: one small row per tile, not worth a
        # TMA copy (optimized=False allows loads that are not whole 32-byte
        # sectors per warp).
        layout = plgpu.Layout.WGMMA.reduce(0)
        bias = plgpu.load(bias_gmem.at[cols], layout=layout, optimized=False)
        z = z + bias.astype(jnp.float32)[None, :]

    def store(*out_smem: Ref) -> None:
        # The pre-activation goes out first, so that it and the activation do
        # not both hold a tile's worth of registers at once.
        if len(out_smem) > 1:
            out_smem[1][...] = z
        y = jax.nn.gelu(z, approximate=True) if activation == "gelu" else z
        out_smem[0][...] = y.astype(out_smem[0].dtype)
        plgpu.commit_smem()  # make the threads' SMEM writes visible to the TMA
        for smem, gmem in zip(out_smem, out_gmem, strict=True):
            plgpu.copy_smem_to_gmem(smem, gmem.at[rows, cols])
        plgpu.wait_smem_to_gmem(0)

    # Allocated once the main loop has released its slots: the output tiles
    # reuse that SMEM.
    out_smem = [
        plgpu.SMEM((bm, bn), out.dtype, transforms=_smem_transforms(out.dtype)) for out in out_gmem
    ]
    pl.run_scoped(store, *out_smem)
