"""The Pallas kernel for TPU (Mosaic TPU): a tiled matmul with an optional
fused bias + GELU epilogue.

Memory hierarchy: the operands live in HBM; each grid step the BlockSpecs
copy one (block_m, block_k) tile of a and one (block_k, block_n) tile of b
into VMEM (Pallas double-buffers these copies behind the compute), the MXU
multiplies them, and a float32 accumulator in VMEM scratch carries the sum
across the k axis of the grid. The epilogue runs once, on the last k step,
while the tile is still in VMEM: that is the fusion XLA may not give you.

Grid (i, j, kk): i and j pick the output tile and are independent
("parallel": Megacore chips split them across cores); kk walks the reduction
and must run in order ("arbitrary").
"""

import functools
from typing import Final, Literal, TypeAlias, overload

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .backend import Interpret, check_block, interpreter_for, native_or_interpreted
from .composition import vary_alike

# Blocks valid on every TPU and within any TPU's VMEM: what a call gets where no
# block table has an entry and the chip is unknown (lowered for "tpu" from a host
# without one, and no device described with jax.sharding.use_abstract_mesh).
DEFAULT_BLOCKS = {"block_m": 128, "block_n": 128, "block_k": 128}
# Where the chip is known, default_blocks takes the first of these whose tiles fit
# a quarter of its VMEM. Why large: each grid step multiplies a (bm, bk) tile by a
# (bk, bn) one, 2*bm*bn*bk FLOPs for (bm + bn)*bk elements fetched from HBM, so
# bm*bn/(bm + bn) FLOPs per bfloat16 byte: 64 at 128x128, 512 at 1024x1024. A TPU
# v5e does 197 TFLOP/s on 0.82 TB/s, 240 FLOPs per byte: with smaller output tiles
# the MXU waits on HBM. Measured there (docs/benchmark.md): 128^3 blocks ran at
# 7-11% of XLA's speed from 4096^3 up; these, at XLA's speed or better.
BLOCKS_BY_SIZE = [(1024, 1024, 512), (512, 512, 512), (256, 256, 256), (128, 128, 128)]
# What the tuner (python -m <package>.tune) tries: (block_m, block_n, block_k).
TUNING_CANDIDATES = [
    (128, 128, 128),
    (256, 256, 256),
    (512, 512, 512),
    (512, 1024, 512),
    (1024, 512, 512),
    (1024, 1024, 256),
    (1024, 1024, 512),
    (512, 1024, 1024),
    (1024, 1024, 1024),
    # Deep k blocks: fewer passes over the float32 accumulator. The TPU v5e's
    # table has them (at 4096^3 in one tuner run, forward and value_and_grad:
    # 1024x512x4096 1.41 and 3.31 ms, 1024x1024x2048 1.47 and 3.41 ms). On a
    # chip whose VMEM they overflow, the tuner rejects them: they do not compile.
    (1024, 1024, 2048),
    (1024, 512, 4096),
]
# Mosaic's scoped-VMEM limit for a kernel that names none: 16 MiB on TPU v4 and
# v5e (32 MiB on v6e). Large tiles need more, or fail to compile
# (CompileTimeScopedVmemOom): vmem_limit asks for it.
DEFAULT_SCOPED_VMEM = 16 * 2**20
# Grid (i, j, kk). Each (i, j) output tile is independent: "parallel", so chips
# with two TensorCores split them. The kk steps add into one accumulator and
# write the tile once, so they must run in order on one core: "arbitrary". Marked
# "parallel", two cores would write the same tile: a race, which the strict
# interpreter reports (tests/test_kernel.py shows it).
DIMENSION_SEMANTICS: Final = ("parallel", "parallel", "arbitrary")

# What the MXU keeps of each float32 input. At the default precision Mosaic
# multiplies float32 in one bfloat16 pass (8 of its 24 significand bits: on a
# TPU v5e, 1e5 to 4e6 ulps off); HIGHEST asks for float32's own (Mosaic's
# multi-pass float32 matmul, #tpu.contract_precision<fp32>), what
# tests/op_spec.py declares (matmul_inputs={"tpu": "float32"}).
# Not Precision.HIGH (three bfloat16 passes): JAX 0.10's Mosaic lowering refuses
# it. bfloat16 inputs: one pass is exact, so the default.
MATMUL_PRECISION: Final = {jnp.dtype(jnp.float32): jax.lax.Precision.HIGHEST}

Activation: TypeAlias = Literal["gelu"] | None


def vmem_capacity() -> int | None:
    """One TensorCore's VMEM, in bytes, on the TPU a kernel lowered now runs on (the
    device described with jax.sharding.use_abstract_mesh, else the default device),
    from JAX's table of TPU chips; None where that is no TPU JAX knows."""
    try:
        capacity: int = pltpu.get_tpu_info().vmem_capacity_bytes
    except ValueError:  # a CPU or GPU default device, or a TPU newer than this JAX
        return None
    return capacity


def vmem_bytes(bm: int, bn: int, bk: int, itemsize: int, out_itemsizes: tuple[int, ...]) -> int:
    """VMEM the kernel's tiles take: every input and output tile twice (Pallas
    double-buffers the copies to and from HBM; the bias's (1, bn) tile pads to 8
    rows), the float32 accumulator, and two float32 tiles for the epilogue's
    temporaries."""
    inputs = 2 * (bm * bk + bk * bn + 8 * bn) * itemsize
    outputs = 2 * bm * bn * sum(out_itemsizes)
    return inputs + outputs + 3 * bm * bn * 4


def vmem_limit(need: int) -> int | None:
    """The vmem_limit_bytes for tiles of `need` bytes: None (Mosaic's default) where
    half the default holds them, else twice the need (Mosaic adds its own scratch),
    within three quarters of the chip's VMEM where the chip is known."""
    if 2 * need <= DEFAULT_SCOPED_VMEM:
        return None
    capacity = vmem_capacity()
    return 2 * need if capacity is None else min(2 * need, capacity * 3 // 4)


def default_blocks(m: object, k: object, n: object, itemsize: int) -> dict[str, int]:
    """Blocks for a call no block table knows: the largest of BLOCKS_BY_SIZE whose
    tiles (clamped to the operands, with the backward's float32 pre-activation)
    take at most a quarter of the chip's VMEM; DEFAULT_BLOCKS where the chip is
    unknown or a size is symbolic (jax.export)."""
    capacity = vmem_capacity()
    if capacity is None or not all(isinstance(size, int) for size in (m, k, n)):
        return DEFAULT_BLOCKS
    for bm, bn, bk in BLOCKS_BY_SIZE:
        clamped = (min(bm, m), min(bn, n), min(bk, k))  # type: ignore[call-overload]
        if vmem_bytes(*clamped, itemsize, (itemsize, 4)) <= capacity // 4:
            return {"block_m": bm, "block_n": bn, "block_k": bk}
    return DEFAULT_BLOCKS


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
    backward pass needs it). Blocks are clamped to the array and validated
    before anything is lowered.
    """
    m, k = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    # A symbolic size (jax.export) cannot be compared with a block: keep the
    # block, and let the edge tile hang over.
    sizes: tuple[object, ...] = (m, n, k)  # typed int, yet symbolic under jax.export
    bm, bn, bk = (
        min(blk, d) if isinstance(d, int) else blk
        for blk, d in zip((block_m, block_n, block_k), sizes, strict=True)
    )
    a_block, a_index = (
        ((bk, bm), lambda i, j, kk: (kk, i))
        if transpose_a
        else ((bm, bk), lambda i, j, kk: (i, kk))
    )
    b_block, b_index = (
        ((bn, bk), lambda i, j, kk: (j, kk))
        if transpose_b
        else ((bk, bn), lambda i, j, kk: (kk, j))
    )
    check_block("a", a_block, a.shape)
    check_block("b", b_block, b.shape)
    check_block("output", (bm, bn), (m, n))
    in_specs = [pl.BlockSpec(a_block, a_index), pl.BlockSpec(b_block, b_index)]
    operands = [a, b]
    if bias is not None:
        # jnp.int32(0), not 0: under jax_enable_x64 a Python int lowers as
        # int64, which Mosaic refuses in an index map ("failed to legalize
        # operation 'func.return'"); the grid indices are int32.
        in_specs.append(pl.BlockSpec((1, bn), lambda i, j, kk: (jnp.int32(0), j)))
        operands.append(bias.reshape(1, n))
    out_spec = pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j))
    operands, varying = vary_alike(operands)
    interpreter = interpreter_for(varying)
    if interpret is True:
        interpret = interpreter
    out_shape = [jax.ShapeDtypeStruct((m, n), a.dtype, manual_axis_type=varying)]
    if return_preactivation:
        out_shape.append(jax.ShapeDtypeStruct((m, n), jnp.float32, manual_axis_type=varying))
    kernel = functools.partial(
        _kernel,
        k_total=k,
        block_k=bk,
        has_bias=bias is not None,
        activation=activation,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )
    itemsizes = tuple(jnp.dtype(out.dtype).itemsize for out in out_shape)
    need = vmem_bytes(bm, bn, bk, jnp.dtype(a.dtype).itemsize, itemsizes)
    call = functools.partial(
        pl.pallas_call,
        kernel,
        grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), pl.cdiv(k, bk)),
        in_specs=in_specs,
        out_specs=[out_spec] * len(out_shape),
        out_shape=out_shape,
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=DIMENSION_SEMANTICS, vmem_limit_bytes=vmem_limit(need)
        ),
    )
    if interpret is None:
        outputs: list[jax.Array] = native_or_interpreted(
            lambda *x: call(interpret=False)(*x),
            lambda *x: call(interpret=interpreter)(*x),
            *operands,
        )
    else:
        outputs = call(interpret=interpret)(*operands)
    return (outputs[0], outputs[1]) if return_preactivation else outputs[0]


def _kernel(
    a_ref: jax.Ref,
    b_ref: jax.Ref,
    *refs: jax.Ref,
    k_total: int,
    block_k: int,
    has_bias: bool,
    activation: Activation,
    transpose_a: bool,
    transpose_b: bool,
) -> None:
    bias_ref = refs[0] if has_bias else None
    out_refs, acc_ref = refs[int(has_bias) : -1], refs[-1]
    kk = pl.program_id(2)

    @pl.when(kk == 0)
    def _init() -> None:
        acc_ref[...] = jnp.zeros_like(acc_ref)

    a, b = a_ref[...], b_ref[...]
    if k_total % block_k:
        # The last k tile hangs over the edge of the arrays: what it reads
        # there is undefined (NaN in interpret mode), so zero both operands.
        a_axis, b_axis = (0 if transpose_a else 1), (1 if transpose_b else 0)
        a_pos = kk * block_k + jax.lax.broadcasted_iota(jnp.int32, a.shape, a_axis)
        b_pos = kk * block_k + jax.lax.broadcasted_iota(jnp.int32, b.shape, b_axis)
        a = jnp.where(a_pos < k_total, a, 0)
        b = jnp.where(b_pos < k_total, b, 0)
    contract = (((0 if transpose_a else 1,), (1 if transpose_b else 0,)), ((), ()))
    acc_ref[...] += jax.lax.dot_general(
        a, b, contract, precision=MATMUL_PRECISION.get(a.dtype), preferred_element_type=jnp.float32
    )

    # The last k step from k, not from pl.num_programs(2): exported with a
    # symbolic k under x64, Pallas's interpreter gives that an int64, which the
    # int32 grid index cannot be compared with (JAX 0.10 to 0.12.1).
    @pl.when(kk == pl.cdiv(k_total, block_k) - 1)
    def _epilogue() -> None:
        # Rows and columns past the edge of m and n are computed but never
        # written back: Pallas drops the out-of-bounds part of edge tiles.
        z = acc_ref[...]
        if bias_ref is not None:
            z = z + bias_ref[...].astype(jnp.float32)
        y = jax.nn.gelu(z, approximate=True) if activation == "gelu" else z
        out_refs[0][...] = y.astype(out_refs[0].dtype)
        if len(out_refs) > 1:
            out_refs[1][...] = z
