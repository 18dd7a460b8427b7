"""The Pallas kernel for GPUs through Triton (deprecated backend): y = x *
factor, row block by row block, and the backend's helpers the op module uses.

TODO: write your kernel here (or in the op module). Each program instance
loads one (block_m, n) tile of rows from global memory into registers,
computes on it, and stores the output tile.
"""

import functools
from collections.abc import Callable
from typing import TypeAlias, TypeVar

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt
from jax.export import default_export_platform
from jax.sharding import ManualAxisType

BACKEND = "triton"
# The platform the kernel runs natively on, as jax.export names platforms.
PLATFORM = "cuda"
# Rows per block: a power of two.
DEFAULT_BLOCK_M = 16
COMPILER_PARAMS = plt.CompilerParams(num_warps=4, num_stages=1)

# None: native on a GPU, interpreted elsewhere; or True/False.
Interpret: TypeAlias = bool | None


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
        _refuse_varying(varying.varying)
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


def _refuse_varying(axes: frozenset[str]) -> None:
    """Pallas's generic interpreter (JAX 0.12's pallas_call_hlo_interpret, the
    only one for this backend) cannot run a kernel whose operands vary over
    mesh axes (inside jax.shard_map with check_vma=True): it replays the kernel
    body, traced without varying axes, on varying blocks, and JAX's check of
    varying axes fails deep inside the lowering. Say so, with the fix, first."""
    raise NotImplementedError(
        f"the kernel: the operands vary over the mesh axes {sorted(axes)} (jax.shard_map "
        "with check_vma=True), which Pallas's generic interpreter (JAX 0.12) cannot run: pass "
        "check_vma=False to jax.shard_map; compiled on a GPU the kernel runs as is"
    )


T = TypeVar("T")


def native_or_interpreted(
    native: Callable[..., T], interpreted: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where the program is lowered for a GPU, interpreted(*operands)
    for any other platform (lax.platform_dependent), so that a program exported
    for a GPU from a CPU host holds the kernel itself."""
    # Eagerly, by the devices the arrays are on: lax.platform_dependent
    # evaluated eagerly asks the default device (JAX 0.10 to 0.12), which gave
    # arrays on a CPU device the native kernel on a host with the accelerator.
    platform = placed_on(*operands)
    if platform is not None:
        return (native if platform == "gpu" else interpreted)(*operands)
    result: T = jax.lax.platform_dependent(*operands, cuda=native, default=interpreted)
    return result


def placed_on(*operands: jax.Array) -> str | None:
    """The platform of the devices these arrays are on, where they are
    concrete (an eager call); None while they are traced (jit, vmap, grad),
    where the program's lowering platform decides."""
    if any(isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array) for x in operands):
        return None
    platforms = {device.platform for x in operands for device in x.devices()}
    return platforms.pop() if len(platforms) == 1 else None
