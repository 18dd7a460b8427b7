"""The backend, NVIDIA Hopper GPUs (Mosaic GPU, sm_90a): what every kernel for
it needs around plgpu.kernel, whatever it computes. kernel.py and the op
module import it: the platform, where a call runs (device_platform), and the
interpreter a kernel runs in off a GPU (plgpu.InterpretGPUParams, which
simulates GMEM, SMEM, the TMA, the barriers and WGMMA on the CPU).
"""

import math
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax

# JAX 0.10's Mosaic GPU has no public interpreter (plgpu.InterpretGPUParams is
# JAX 0.11's) and needs absl-py to import: this backend needs JAX 0.11 or later
# (the tpu and triton backends run on JAX 0.10 too).
if tuple(int(part) for part in jax.__version__.split(".")[:2]) < (0, 11):
    raise ImportError(
        f"the mosaic_gpu backend needs JAX >= 0.11 (this is JAX {jax.__version__}):"
        " pip install -U 'jax>=0.11,<0.13' (with Python 3.12 or newer: JAX 0.11 and"
        " newer publish no wheels for Python 3.11)"
    )

from jax.experimental.pallas import mosaic_gpu as plgpu  # noqa: E402
from jax.export import default_export_platform  # noqa: E402

from .composition import DEVICE_PLATFORMS  # noqa: E402

BACKEND = "mosaic_gpu"
# The platform the kernel runs natively on, as jax.export names platforms
# (JAX's device.platform says "gpu"). Hopper only: see present() in the tests.
PLATFORM = "cuda"

# None: native on a GPU, interpreted elsewhere; True/False; or the interpreter's settings.
Interpret: TypeAlias = bool | plgpu.InterpretGPUParams | None
# A kernel's reference to an array in GMEM, SMEM or the accumulator. Pallas
# declares its functions with JAX-internal ref types (jax._src.state), which
# code outside JAX cannot name, so this is Any.
Ref: TypeAlias = Any


def interpreted(interpret: Interpret, *operands: jax.Array) -> bool:
    """Whether a call with this interpret argument on these operands runs in
    the interpreter."""
    return bool(resolve_interpret(interpret, *operands))


def resolve_interpret(
    interpret: Interpret, *operands: jax.Array
) -> bool | plgpu.InterpretGPUParams:
    """Run the kernel for real on a GPU, interpreted (on the CPU) elsewhere.

    Mosaic GPU interprets only under plgpu.InterpretGPUParams: plain True
    becomes the default parameters."""
    if interpret is None:
        interpret = not runs_natively(*operands)
    if interpret is True:
        return plgpu.InterpretGPUParams()
    return interpret


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
    return DEVICE_PLATFORMS.get(default_export_platform(), default_export_platform())


def runs_natively(*operands: jax.Array) -> bool:
    """Whether the kernel on these operands runs on its own hardware (an
    NVIDIA GPU), as device_platform tells."""
    return device_platform(*operands) == "gpu"


def refuse_several_devices() -> None:
    """The GPU interpreter keeps one global state for all devices: a kernel
    finishing on one device asserts that no other holds a barrier, so it
    cannot run per shard on several devices at once (inside jax.shard_map,
    or on sharded operands). Say so before it fails at run time."""
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
    elsewhere (device_platform: the operands' mesh or devices, else the
    default device).

    Chosen while tracing, not per lowering platform (as the TPU and Triton
    backends choose, through lax.platform_dependent): on JAX 0.12 a
    platform_dependent holding the interpreter fails to lower for the GPU
    (the cond expects the interpreter's ordered io_callback tokens from the
    native branch too), and the callbacks cannot be serialized for the CPU.
    The op's implementation="auto" chooses per lowering platform
    between the native kernel and the reference: that is the program to
    export for a GPU from a CPU host."""
    return native(*operands) if runs_natively(*operands) else interpreted(*operands)
