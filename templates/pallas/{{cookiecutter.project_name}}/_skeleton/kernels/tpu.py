"""The Pallas kernel for TPU (Mosaic TPU): y = x * factor, row block by row
block, and the backend's helpers the op module uses.

TODO: write your kernel here (or in the op module). Each grid step the
BlockSpec copies one (block_m, n) tile of rows from HBM into VMEM, the body
computes on it there, and the output tile is copied back.
"""

import functools
from collections.abc import Callable
from typing import TypeAlias, TypeVar

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.export import default_export_platform
from jax.sharding import ManualAxisType

BACKEND = "tpu"
# The platform the kernel runs natively on, as jax.export names platforms.
PLATFORM = "tpu"
# Rows per block: a multiple of 8 (TPU tiles memory as (8, 128)).
DEFAULT_BLOCK_M = 8

# None: native on a TPU, interpreted elsewhere; True/False; or the interpreter's settings.
Interpret: TypeAlias = bool | pltpu.InterpretParams | None


def check_block(name: str, block: tuple[int, ...], array_shape: tuple[int, ...]) -> None:
    """Mosaic TPU tiles memory as (8, 128): each block's last two dimensions
    must be divisible by 8 and 128 respectively, or span the whole array."""
    tail = zip(block[-2:], array_shape[-2:], (8, 128), strict=True)
    for axis, (size, full, unit) in enumerate(tail):
        if size != full and size % unit:
            raise ValueError(
                f"block {block} of {name} {tuple(array_shape)} is invalid on TPU: dimension "
                f"{axis - 2} must be a multiple of {unit} or equal {full}, got {size}"
            )


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


def vary_alike(operands: list[jax.Array]) -> tuple[list[jax.Array], ManualAxisType]:
    """Inside jax.shard_map, pallas_call's result types must name the mesh axes
    they vary over (check_vma): those of the operands together. Operands that
    vary over fewer are cast up (pcast), whose transpose sums their cotangents
    over the added axes."""
    axes = frozenset().union(*(jax.typeof(x).manual_axis_type.varying for x in operands))
    operands = [
        jax.lax.pcast(x, tuple(sorted(axes - jax.typeof(x).manual_axis_type.varying)), to="varying")
        for x in operands
    ]
    return operands, jax.typeof(operands[0]).manual_axis_type


def interpreted(interpret: Interpret) -> bool:
    """Whether a call with this interpret argument runs in Pallas's interpreter."""
    return default_export_platform() != PLATFORM if interpret is None else bool(interpret)


def interpreter_for(varying: ManualAxisType) -> bool | pltpu.InterpretParams:
    """Operands that vary over mesh axes (jax.shard_map, check_vma=True): the
    TPU interpreter, which keeps their varying axes (the generic one, JAX 0.12,
    replays the kernel body on varying blocks, traced without them, and
    fails). Elsewhere the generic one: the TPU interpreter cannot run a
    vmapped kernel. Same kernel body either way."""
    return pltpu.InterpretParams() if varying.varying else True


T = TypeVar("T")


def native_or_interpreted(
    native: Callable[..., T], interpreted: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where the program is lowered for TPU, interpreted(*operands)
    for any other platform (lax.platform_dependent), so that a program exported
    for TPU from a CPU host holds the kernel itself."""
    # Eagerly, by the devices the arrays are on: lax.platform_dependent
    # evaluated eagerly asks the default device (JAX 0.10 to 0.12), which gave
    # arrays on a CPU device the native kernel on a host with the accelerator.
    platform = placed_on(*operands)
    if platform is not None:
        return (native if platform == PLATFORM else interpreted)(*operands)
    result: T = jax.lax.platform_dependent(*operands, tpu=native, default=interpreted)
    return result


def placed_on(*operands: jax.Array) -> str | None:
    """The platform of the devices these arrays are on, where they are
    concrete (an eager call); None while they are traced (jit, vmap, grad),
    where the program's lowering platform decides."""
    if any(isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array) for x in operands):
        return None
    platforms = {device.platform for x in operands for device in x.devices()}
    return platforms.pop() if len(platforms) == 1 else None
