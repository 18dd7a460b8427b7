"""The backend, TPU (Mosaic TPU): what every kernel for it needs around
pallas_call, whatever it computes. kernel.py and the op module import it:
the platform, the interpreter a kernel runs in off a TPU, and Mosaic TPU's
tiling rule for blocks.
"""

from collections.abc import Callable
from typing import TypeAlias, TypeVar

import jax
from jax.experimental.pallas import tpu as pltpu
from jax.export import default_export_platform
from jax.sharding import ManualAxisType

from .composition import per_lowering_platform

BACKEND = "tpu"
# The platform the kernel runs natively on, as jax.export names platforms.
PLATFORM = "tpu"

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


def interpreted(interpret: Interpret) -> bool:
    """Whether a call with this interpret argument runs in Pallas's
    interpreter: as asked, and for None where this host lacks a TPU
    (native_or_interpreted chooses per lowering platform, but only the
    host's programs run here)."""
    return default_export_platform() != PLATFORM if interpret is None else bool(interpret)


def interpreter_for(varying: ManualAxisType) -> bool | pltpu.InterpretParams:
    """The interpreter for operands of this type. Inside jax.shard_map with
    check_vma=True (operands that vary over mesh axes), Pallas's TPU
    interpreter (pltpu.InterpretParams), which keeps their varying axes: the
    generic one (interpret=True, JAX 0.12's pallas_call_hlo_interpret) replays
    the kernel body, traced without them, on varying blocks, and JAX's check
    of varying axes fails ("Primitive add requires varying manual axes to
    match"). Elsewhere the generic one: the TPU interpreter cannot run
    a vmapped kernel (its lowering fails on the grid axis vmap adds), and its
    host callbacks are effects, which vmap of lax.platform_dependent refuses.
    Both run the same kernel body."""
    return pltpu.InterpretParams() if varying.varying else True


T = TypeVar("T")


def native_or_interpreted(
    native: Callable[..., T], interpreted: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where the program is lowered for TPU, interpreted(*operands)
    for any other platform (composition.per_lowering_platform: eagerly, by the
    devices the arrays are on), so that a program exported for TPU from a CPU
    host holds the kernel itself."""
    return per_lowering_platform(PLATFORM, native, interpreted, *operands)
