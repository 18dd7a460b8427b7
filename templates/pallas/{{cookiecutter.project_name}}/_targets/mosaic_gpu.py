"""What the tests need to know about the Mosaic GPU target (Hopper)."""

import contextlib
import io

import jax
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

from {{ cookiecutter.package_name }} import backend

from conformance import Refuse
from devices import mesh_devices

NAME = "Hopper (sm_90a) GPU"
# Strict interpretation: a data race raises (for instance a TMA store reading
# SMEM that the threads wrote without plgpu.commit_smem), memory the kernel did
# not write reads as NaN, so a missing write fails a test, and an out-of-bounds
# read raises. The interpreter runs WGMMA synchronously: it does not check the
# wgmma_wait discipline. Unlike the TPU interpreter it has no thread count to
# raise: it sets num_cores_or_threads to the kernel's warpgroups (one here) and
# runs the grid's blocks one after another, so races between thread blocks
# cannot be seen; races with the TMA (its own simulated threads) can.
#
# on_race="raise" is JAX 0.12's: the interpreter of JAX 0.11 prints
# "RACE DETECTED" and carries on, so run_strict reads what it prints.
RAISES_ON_RACE = "on_race" in plgpu.InterpretGPUParams.__dataclass_fields__
STRICT = plgpu.InterpretGPUParams(
    detect_races=True,
    uninitialized_memory="nan",
    out_of_bounds_reads="raise",
    **({"on_race": "raise"} if RAISES_ON_RACE else {}),
)


class RaceDetected(RuntimeError):
    """A data race that an interpreter without on_race (JAX 0.11) printed."""


# What a race raises under run_strict.
RACE_ERROR = jax.errors.JaxRuntimeError if RAISES_ON_RACE else RaceDetected


def run_strict(fn, *args, **kwargs):
    """fn(*args, **kwargs), finished; a data race the strict interpreter saw
    raises RACE_ERROR ("RACE DETECTED ..."), on every JAX version."""
    if RAISES_ON_RACE:
        return jax.block_until_ready(fn(*args, **kwargs))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = jax.block_until_ready(fn(*args, **kwargs))
    if "RACE DETECTED" in printed.getvalue():
        raise RaceDetected(printed.getvalue())
    return result


# The custom call a lowered kernel becomes.
KERNEL_CALL = "custom_call @mosaic_gpu_v2"
# WGMMA's instruction is 64 rows tall: block_m=96 is not a multiple of 64.
BAD_BLOCKS = {"block_m": 96}
BAD_LOWERING = "multiple of 64"
# Blocks the forward accepts and a backward matmul does not: block_n=512 shrinks
# to n=64 in the forward, but da = dz @ b^T has k=512 columns, more than WGMMA's
# 256. (shape (m, k, n), blocks)
BACKWARD_ONLY_BAD = ((64, 512, 64), {"block_n": 512})


def lower(fn, *args) -> str:
    """Lower for an NVIDIA GPU on this host, no GPU needed: Mosaic GPU builds
    its kernel while lowering, which is where WGMMA's shape rules are checked;
    the GPU binary is compiled only when XLA compiles for a real GPU."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def present() -> bool:
    """A Hopper GPU: WGMMA exists on sm_90a only."""
    return jax.default_backend() == "gpu" and any(
        getattr(d, "compute_capability", "") == "9.0" for d in jax.devices()
    )


def reset_strict():
    """Nothing to do: the GPU interpreter cleans up after an error itself."""


# --- jax.export ----------------------------------------------------------------------
EXPORT_PLATFORM = "cuda"
EXPORT_DISABLED_CHECKS = ()  # mosaic_gpu_v2 is on jax.export's list of stable calls
# No symbolic batch: Mosaic GPU's lowering asserts on a symbolic grid (a bare
# AssertionError), so the kernel refuses symbolic sizes. Tracked with Pallas
# shape polymorphism in jax-ml/jax#24960.
SYMBOLIC_BATCH = "128*b"
SYMBOLIC_BATCH_ERROR = (NotImplementedError, "the kernel: symbolic sizes")


# The device an export from this host is for, described to JAX (no such
# device here): the op reads the block table for its kind.
DEVICE = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")


def export_context():
    return jax.sharding.use_abstract_mesh(
        AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=DEVICE)
    )


# Where the conformance cells lower the op ("kernel") from this host
# (OpSpec.platforms): nowhere. It is interpreted here (the choice is the
# host's, as lax.platform_dependent cannot hold the interpreter's ordered
# callbacks on JAX 0.12), and those callbacks cannot be serialized. (The op's
# default, "auto", is chosen per lowering platform: exported for cuda from
# this host it holds mosaic_gpu_v2, which tests/test_composed.py checks.)
PLATFORMS = {}

# One artifact for the CPU and the GPU (platforms=("cpu", "cuda")) fails on
# JAX 0.11 to 0.12.0: plgpu.kernel (an mpmd_map) has no multi-platform
# lowering, and lax.platform_dependent lowers each branch it keeps for every
# lowering platform. JAX 0.12.1 lowers each branch for its own platforms only,
# and the artifact holds both (None: the test asserts so). Pinned where it
# fails: drop the pin when the window leaves 0.12.0.
MULTI_PLATFORM_ERROR = (
    (NotImplementedError, "mpmd_map does not support multi-platform lowering")
    if jax.__version_info__ < (0, 12, 1)
    else None
)

# The GPU interpreter keeps one global state for all devices, and a kernel
# finishing on one device asserts that no other holds a barrier ("Barrier
# remains allocated"), which fails when several CPU devices interpret at once:
# the kernel refuses to be interpreted per shard on several devices.
INTERPRETS_SHARDED = False
# Nor can custom_partitioning hold the interpreted kernel: the GPU interpreter
# works through ordered io_callbacks, an effect the partitioner's callback
# cannot handle, so the partitioned op refuses it. The native kernel has
# no such effect; check it on a GPU runner.
PARTITIONS_INTERPRETED = (NotImplementedError, "custom_partitioning cannot hold")

# The conformance cells this backend refuses whatever the op (tests/op_spec.py
# adds them after the op's own refusals, so its refusal of a cell comes first).
#
# The interpreter refuses to run per shard on several devices (a GPU runs it):
# in jax.shard_map, under an Explicit mesh, and vmapped over a batch split
# over one. And custom_partitioning cannot hold the interpreter's ordered
# io_callbacks.
SEVERAL_DEVICES = Refuse(
    NotImplementedError,
    r"the kernel: per shard on several devices",
    "interpreted: one device only",
)
PARTITIONED = Refuse(
    NotImplementedError,
    r"{{ cookiecutter.op_name }}: custom_partitioning cannot hold",
    "interpreted: call {{ cookiecutter.op_name }}",
)
# The same io_callbacks are effects, which jax.checkpoint cannot differentiate.
CHECKPOINT_EFFECTS = Refuse(
    NotImplementedError,
    r"Effects not supported in AD of .checkpoint./.remat.",
    "interpreted: host callbacks",
)
# Mosaic GPU cannot lower a symbolic grid (jax-ml/jax#24960): export with
# concrete shapes.
SYMBOLIC = Refuse(
    NotImplementedError,
    r"the kernel: symbolic sizes",
    "refused: no symbolic sizes on this backend (jax-ml/jax#24960)",
)
# Those refusals are the interpreter's, so they apply where the cells run it:
# the kernel is interpreted off a GPU (backend.device_platform). The unsharded
# cells run on the default device; the sharded ones on tests/conftest.py's
# mesh devices, simulated CPU devices where there are too few GPUs.
INTERPRETS = not backend.runs_natively()
SHARDS_INTERPRETED = mesh_devices(4)[0].platform != "gpu"
INTERPRETED_SHARDED = {
    # Listed before "shard-map-*" (the first glob that matches wins): "y" stays
    # automatic there, so the cell runs the custom_partitioning entry point.
    "shard-map-partial-*": PARTITIONED,
    "shard-map-*": SEVERAL_DEVICES,
    "vmap-sharded-new-axis": SEVERAL_DEVICES,
    "jit-explicit-*": SEVERAL_DEVICES,
    "grad-grad-explicit-*": SEVERAL_DEVICES,
    "jit-auto-*": PARTITIONED,
}
BACKEND_REFUSALS = {
    "export-symbolic": SYMBOLIC,
    **(INTERPRETED_SHARDED if SHARDS_INTERPRETED else {}),
    **({"checkpoint": CHECKPOINT_EFFECTS} if INTERPRETS else {}),
}

# A kernel whose block spans the row whole (the skeleton's) refuses a row
# Mosaic GPU cannot block: whole multiples of 16 bytes (size-n-1, -ragged).
WHOLE_ROWS = Refuse(
    ValueError,
    r"is invalid on Mosaic GPU: its rows must be whole multiples of 16 bytes",
    "refused: Mosaic GPU rows are whole multiples of 16 bytes; pad the row",
)
WHOLE_ROW_REFUSALS = {"size-n-1": WHOLE_ROWS, "size-n-ragged": WHOLE_ROWS}
