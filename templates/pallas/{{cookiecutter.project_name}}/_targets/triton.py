"""What the tests need to know about the Triton (GPU) target."""

import jax
from jax import export
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

from conformance import Refuse

NAME = "gpu"
# Triton kernels have only the plain interpreter: no race detector, no
# poisoned memory. Masked loads and stores are what keep edges correct.
STRICT = True
RACE_ERROR = jax.errors.JaxRuntimeError  # (no race detector: never raised)


def run_strict(fn, *args, **kwargs):
    """fn(*args, **kwargs), finished (the plain interpreter detects no races)."""
    return jax.block_until_ready(fn(*args, **kwargs))


KERNEL_CALL = "__gpu$xla.gpu.triton"
BAD_BLOCKS = {"block_m": 96}  # Triton needs power-of-two block sizes
BAD_LOWERING = "power of 2"

# Lowering for a GPU on a host without one needs an abstract GPU device.
# The op also reads the block table for its device kind.
DEVICE = AbstractDevice(device_kind="NVIDIA H100", num_cores=None, platform="gpu")
_MESH = AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=DEVICE)


def lower(fn, *args) -> str:
    with jax.sharding.use_abstract_mesh(_MESH):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def present() -> bool:
    return jax.default_backend() == "gpu"


def reset_strict():
    """Nothing to do: the plain interpreter keeps no state between kernels."""


# --- jax.export ----------------------------------------------------------------------
EXPORT_PLATFORM = "cuda"
# Triton calls carry a compiled kernel for one GPU: jax.export asks to be told
# that this is meant.
EXPORT_DISABLED_CHECKS = (export.DisabledSafetyCheck.custom_call(KERNEL_CALL),)
# No symbolic batch: pallas_call refuses dynamically-shaped blocks (this
# kernel's blocks span the whole arrays), so the kernel refuses symbolic
# sizes. Tracked with Pallas shape polymorphism in jax-ml/jax#24960.
SYMBOLIC_BATCH = "128*b"
SYMBOLIC_BATCH_ERROR = (NotImplementedError, "the kernel: symbolic sizes")


def export_context():
    """The abstract GPU lowering needs (see lower above)."""
    return jax.sharding.use_abstract_mesh(_MESH)


# Where the conformance cells lower the op ("kernel") from this host
# (OpSpec.platforms): Triton lowers only under an abstract GPU device
# (export_context), which the generic cells do not set up.
PLATFORMS = {"cpu": ""}

# One artifact for the CPU and the kernel's platform (platforms=("cpu", ...))
# fails on JAX 0.10 to 0.12.0: lax.platform_dependent keeps only the branches
# for the lowering platforms, but lowers each kept branch for all of them, so
# the native kernel is lowered for the CPU too. JAX 0.12.1 lowers each branch
# for its own platforms only, and the artifact holds both (None: the test
# asserts so). Pinned where it fails: drop the pin when the window leaves 0.12.0.
MULTI_PLATFORM_ERROR = (
    (ValueError, "Only interpret mode is supported on CPU backend")
    if jax.__version_info__ < (0, 12, 1)
    else None
)

# The sharding tests run the interpreted kernel on several CPU devices at once.
INTERPRETS_SHARDED = True
# ...and custom_partitioning compiles it.
PARTITIONS_INTERPRETED = True

# The conformance cells this backend refuses whatever the op (tests/op_spec.py
# adds them after the op's own refusals).
#
# Inside jax.shard_map with check_vma=True (the default) the kernel's types are
# right (composition.vary_alike), but Pallas's generic interpreter (JAX 0.12's
# pallas_call_hlo_interpret, the only one for this backend) replays the kernel
# body, traced without varying axes, on varying blocks, and fails JAX's check
# of varying axes (a k loop's carry fails scan's, say). The interpreted kernel
# refuses such operands up front; compiled on a GPU it runs. (The TPU backend
# runs these cells in Pallas's TPU interpreter instead.)
INTERPRETER_VMA = Refuse(
    NotImplementedError,
    r"the kernel: the operands vary over the mesh axes .* pass check_vma=False",
    "interpreted: check_vma=False only",
)
# Pallas on GPUs cannot size a kernel's grid or blocks symbolically
# (jax-ml/jax#24960): export with concrete shapes.
SYMBOLIC = Refuse(
    NotImplementedError,
    r"the kernel: symbolic sizes",
    "refused: no symbolic sizes on this backend (jax-ml/jax#24960)",
)
BACKEND_REFUSALS = {"export-symbolic": SYMBOLIC, "shard-map-*": INTERPRETER_VMA}

# A kernel whose block spans the row whole (the skeleton's) refuses a row
# Triton cannot block: every block size a power of two (size-n-ragged: 17).
WHOLE_ROW_REFUSALS = {
    "size-n-ragged": Refuse(
        ValueError,
        r"is invalid on Triton: every block size must be a power of two",
        "refused: Triton blocks are powers of two; pad the row",
    ),
}
