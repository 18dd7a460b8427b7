"""The Pallas kernel for GPUs through Triton: a tiled matmul with an optional
fused bias + GELU epilogue.

DEPRECATED BACKEND: Pallas's Triton lowering is deprecated since JAX 0.11 in
favour of Mosaic GPU (generate with backend=mosaic_gpu for Hopper GPUs).
It still runs on older GPUs (Ampere, Ada), which is the reason to pick it.

Model: each program instance (one per (i, j) in the grid) owns one
(block_m, block_n) output tile. It walks the k axis in block_k steps, loading
a tile of each operand from global memory into registers/shared memory
(Triton decides), multiplying bfloat16 on the tensor cores (float32 as IEEE
float32, see _kernel), and accumulating in float32 registers. There is no
scratch memory and no sequential grid axis: the k loop lives inside the
kernel. Edges are handled with masked loads (zeros) and
masked stores.
"""

import functools
from typing import Literal, TypeAlias, overload

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from .backend import Interpret, Ref, interpreted, native_or_interpreted, refuse_varying
from .composition import vary_alike

DEFAULT_BLOCKS = {"block_m": 64, "block_n": 64, "block_k": 32}
# What the tuner (python -m <package>.tune) tries: (block_m, block_n, block_k).
TUNING_CANDIDATES = [
    (64, 64, 32),
    (128, 64, 32),
    (64, 128, 32),
    (128, 128, 32),
    (64, 64, 64),
    (128, 128, 64),
]


def default_blocks(m: object, k: object, n: object, itemsize: int) -> dict[str, int]:
    """Blocks for a call no block table knows: DEFAULT_BLOCKS, whatever the sizes.
    (The TPU kernel chooses by the chip's VMEM; here shared memory and registers
    bound the tiles, and the tuner is the way to larger ones.)"""
    return DEFAULT_BLOCKS


COMPILER_PARAMS = plt.CompilerParams(num_warps=4, num_stages=3)

Activation: TypeAlias = Literal["gelu"] | None


def check_block(name: str, block: tuple[int, ...], array_shape: tuple[int, ...]) -> None:
    """Triton needs every array in the kernel to have power-of-two sizes, and
    its dot needs at least 16 along each dimension."""
    for size in block:
        if size < 16 or size & (size - 1):
            raise ValueError(
                f"block {block} of {name} {tuple(array_shape)} is invalid on Triton: "
                f"every block size must be a power of two >= 16, got {size}"
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
    backward pass needs it). Blocks are validated before anything is lowered;
    unlike TPU blocks they are not clamped: masks handle arrays smaller than
    a block.
    """
    m, k = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    if not all(isinstance(d, int) for d in (m, n, k)):
        # jax.export's symbolic sizes: pallas_call refuses dynamically-shaped
        # blocks, and this kernel's span the whole arrays (jax-ml/jax#24960).
        raise NotImplementedError(
            f"the kernel: symbolic sizes {(m, k, n)}: the Triton kernel's blocks span whole "
            "arrays, which Pallas cannot size dynamically; export with concrete shapes"
        )
    check_block("a", (block_k, block_m) if transpose_a else (block_m, block_k), a.shape)
    check_block("b", (block_n, block_k) if transpose_b else (block_k, block_n), b.shape)
    check_block("output", (block_m, block_n), (m, n))
    operands = [a, b] if bias is None else [a, b, bias]
    operands, varying = vary_alike(operands)
    if varying.varying and interpreted(interpret):
        refuse_varying(varying.varying)
    out_shape = [jax.ShapeDtypeStruct((m, n), a.dtype, manual_axis_type=varying)]
    if return_preactivation:
        out_shape.append(jax.ShapeDtypeStruct((m, n), jnp.float32, manual_axis_type=varying))
    kernel = functools.partial(
        _kernel,
        sizes=(m, n, k),
        blocks=(block_m, block_n, block_k),
        has_bias=bias is not None,
        activation=activation,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )
    whole = pl.BlockSpec(memory_space=pl.ANY)  # the kernel indexes global memory itself
    call = functools.partial(
        pl.pallas_call,
        kernel,
        grid=(pl.cdiv(m, block_m), pl.cdiv(n, block_n)),
        in_specs=[whole] * len(operands),
        out_specs=[whole] * len(out_shape),
        out_shape=out_shape,
        compiler_params=COMPILER_PARAMS,
    )
    if interpret is None:
        outputs: list[jax.Array] = native_or_interpreted(
            lambda *x: call(interpret=False)(*x), lambda *x: call(interpret=True)(*x), *operands
        )
    else:
        outputs = call(interpret=interpret)(*operands)
    return (outputs[0], outputs[1]) if return_preactivation else outputs[0]


def _kernel(
    a_ref: Ref,
    b_ref: Ref,
    *refs: Ref,
    sizes: tuple[int, int, int],
    blocks: tuple[int, int, int],
    has_bias: bool,
    activation: Activation,
    transpose_a: bool,
    transpose_b: bool,
) -> None:
    m, n, k = sizes
    block_m, block_n, block_k = blocks
    bias_ref = refs[0] if has_bias else None
    out_refs = refs[int(has_bias) :]
    i, j = pl.program_id(0), pl.program_id(1)
    rows = i * block_m + jnp.arange(block_m)
    cols = j * block_n + jnp.arange(block_n)

    def tile(
        ref: Ref,
        row_start: jax.Array,
        row_size: int,
        col_start: jax.Array,
        col_size: int,
        valid: jax.Array,
    ) -> jax.Array:
        view = ref.at[pl.ds(row_start, row_size), pl.ds(col_start, col_size)]
        loaded: jax.Array = plt.load(view, mask=valid, other=0)
        return loaded

    def step(kk: jax.Array, acc: jax.Array) -> jax.Array:
        ks = kk * block_k + jnp.arange(block_k)
        if transpose_a:  # a is (k, m): load a (block_k, block_m) tile
            a = tile(
                a_ref,
                kk * block_k,
                block_k,
                i * block_m,
                block_m,
                (ks[:, None] < k) & (rows[None, :] < m),
            )
        else:
            a = tile(
                a_ref,
                i * block_m,
                block_m,
                kk * block_k,
                block_k,
                (rows[:, None] < m) & (ks[None, :] < k),
            )
        if transpose_b:  # b is (n, k): load a (block_n, block_k) tile
            b = tile(
                b_ref,
                j * block_n,
                block_n,
                kk * block_k,
                block_k,
                (cols[:, None] < n) & (ks[None, :] < k),
            )
        else:
            b = tile(
                b_ref,
                kk * block_k,
                block_k,
                j * block_n,
                block_n,
                (ks[:, None] < k) & (cols[None, :] < n),
            )
        # HIGHEST: float32 operands multiply as IEEE float32. Left at the default,
        # Triton multiplies them as TensorFloat-32 (10-bit significands, about
        # 1e4 float32 ulps off); bfloat16 operands are unaffected. For TF32's
        # speed, pass precision=jax.lax.Precision.DEFAULT and declare
        # matmul_inputs={"gpu": "tensorfloat32"} in tests/op_spec.py.
        product: jax.Array = plt.dot(
            a, b, trans_a=transpose_a, trans_b=transpose_b, precision=jax.lax.Precision.HIGHEST
        )
        return acc + product

    z = jax.lax.fori_loop(0, pl.cdiv(k, block_k), step, jnp.zeros((block_m, block_n), jnp.float32))
    if bias_ref is not None:
        bias = plt.load(bias_ref.at[pl.ds(j * block_n, block_n)], mask=cols < n, other=0)
        z = z + bias.astype(jnp.float32)[None, :]
    y = jax.nn.gelu(z, approximate=True) if activation == "gelu" else z
    inside = (rows[:, None] < m) & (cols[None, :] < n)
    out_tile = pl.ds(i * block_m, block_m), pl.ds(j * block_n, block_n)
    plt.store(out_refs[0].at[out_tile], y.astype(out_refs[0].dtype), mask=inside)
    if len(out_refs) > 1:
        plt.store(out_refs[1].at[out_tile], z, mask=inside)
