"""The Pallas kernel for NVIDIA Hopper GPUs (Mosaic GPU): y = x * factor, row
block by row block, and the backend's helpers the op module uses.

TODO: write your kernel here (or in the op module). One thread block per
(block_m, n) tile of rows: the TMA copies the tile from GMEM into SMEM, the
threads compute on it and write the result to SMEM, and the TMA stores it.

Interpret mode (plgpu.InterpretGPUParams) runs this same kernel on the CPU,
simulating GMEM, SMEM, the TMA and the barriers.
"""

import functools
import math
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax
import jax.numpy as jnp

# JAX 0.10's Mosaic GPU has no public interpreter (plgpu.InterpretGPUParams is
# JAX 0.11's) and needs absl-py to import: this backend needs JAX 0.11 or later
# (the tpu and triton backends run on JAX 0.10 too).
if tuple(int(part) for part in jax.__version__.split(".")[:2]) < (0, 11):
    raise ImportError(
        f"the mosaic_gpu backend needs JAX >= 0.11 (this is JAX {jax.__version__}):"
        " pip install -U 'jax>=0.11,<0.13' (with Python 3.12 or newer: JAX 0.11 and"
        " newer publish no wheels for Python 3.11)"
    )

from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import mosaic_gpu as plgpu  # noqa: E402
from jax.export import default_export_platform  # noqa: E402
from jax.sharding import ManualAxisType  # noqa: E402

BACKEND = "mosaic_gpu"
# The platform the kernel runs natively on, as jax.export names platforms.
PLATFORM = "cuda"
# Rows per block (each thread block's tile).
DEFAULT_BLOCK_M = 64

# None: native on a GPU, interpreted elsewhere; True/False; or the interpreter's settings.
Interpret: TypeAlias = bool | plgpu.InterpretGPUParams | None
# A kernel's reference to an array in GMEM or SMEM (Pallas's ref types are
# JAX-internal).
Ref: TypeAlias = Any


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
    interpret = _interpret(interpret, x)
    if interpret:
        _refuse_several_devices()
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


def vary_alike(operands: list[jax.Array]) -> tuple[list[jax.Array], ManualAxisType]:
    """Inside jax.shard_map, the kernel's result types must name the mesh axes
    they vary over (check_vma): those of the operands together. Operands that
    vary over fewer are cast up (pcast), whose transpose sums their cotangents
    over the added axes."""
    axes = frozenset().union(*(jax.typeof(x).manual_axis_type.varying for x in operands))
    operands = [
        jax.lax.pcast(x, tuple(sorted(axes - jax.typeof(x).manual_axis_type.varying)), to="varying")
        for x in operands
    ]
    return operands, jax.typeof(operands[0]).manual_axis_type


def interpreted(interpret: Interpret, *operands: jax.Array) -> bool:
    """Whether a call with this interpret argument on these operands runs in
    the interpreter."""
    return bool(_interpret(interpret, *operands))


def device_platform(*operands: jax.Array) -> str:
    """The platform (a jax.Device's: cpu, gpu, tpu) of the devices the operands
    are computed on, as far as tracing can tell: the mesh in their types
    (sharded under jit), the context mesh (inside jax.shard_map, under
    jax.set_mesh or jax.sharding.use_abstract_mesh), the devices of concrete
    arrays (eager calls); else the default device (jax.default_device, else
    this host's default platform). Not the host's choice alone: a host with
    one GPU runs sharding on a mesh of simulated CPU devices, where a compiled
    GPU kernel cannot run.

    What tracing cannot tell: under jax.jit (or vmap, grad), the type of an
    operand on one device, not sharded over a mesh, names no device, and
    jax.jit reuses one trace wherever its inputs are placed. There the
    platform is the default device's, also for arrays committed to another:
    for CPU arrays on a GPU host, trace under jax.default_device(cpu device)
    (part of jit's cache key) or pass interpret=True; else the native kernel
    is refused when compiled for the CPU ("Only interpret mode is supported
    on CPU backend")."""
    meshes = [jax.typeof(x).sharding.mesh for x in operands if hasattr(x, "dtype")]
    for mesh in [*meshes, jax.sharding.get_abstract_mesh()]:
        device = getattr(mesh, "abstract_device", None)
        if device is not None:
            return str(device.platform)
    for x in operands:
        if hasattr(x, "devices") and not isinstance(x, jax.core.Tracer):  # concrete: placed
            return str(next(iter(x.devices())).platform)
    default = jax.config.jax_default_device
    if default is not None:
        return str(getattr(default, "platform", default))
    return _DEVICE_PLATFORMS.get(default_export_platform(), default_export_platform())


# jax.export's platform names, as a jax.Device names them.
_DEVICE_PLATFORMS = {"cuda": "gpu", "rocm": "gpu"}


def runs_natively(*operands: jax.Array) -> bool:
    """Whether the kernel on these operands runs on its own hardware (an
    NVIDIA GPU), as device_platform tells."""
    return device_platform(*operands) == "gpu"


def _refuse_several_devices() -> None:
    """The GPU interpreter keeps one global state for all devices, so it
    cannot run per shard on several devices at once. Say so before it fails."""
    mesh = jax.sharding.get_abstract_mesh()
    if math.prod(mesh.shape[axis] for axis in mesh.manual_axes) > 1:
        raise NotImplementedError(
            f"the kernel: per shard on several devices (mesh axes {sorted(mesh.manual_axes)}), "
            "which Mosaic GPU's interpreter cannot run: it runs compiled on a GPU; on this "
            "host, gather the operands onto one device"
        )


T = TypeVar("T")


def native_or_interpreted(
    native: Callable[..., T], interpreted: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where they are computed on a GPU, interpreted(*operands)
    elsewhere (device_platform): chosen while tracing, as a
    lax.platform_dependent holding the interpreter fails to lower for the GPU
    on JAX 0.12 (its ordered io_callbacks)."""
    return native(*operands) if runs_natively(*operands) else interpreted(*operands)


def _interpret(interpret: Interpret, *operands: jax.Array) -> bool | plgpu.InterpretGPUParams:
    """Mosaic GPU interprets only under plgpu.InterpretGPUParams: plain True
    becomes the default parameters."""
    if interpret is None:
        interpret = not runs_natively(*operands)
    if interpret is True:
        return plgpu.InterpretGPUParams()
    return interpret
