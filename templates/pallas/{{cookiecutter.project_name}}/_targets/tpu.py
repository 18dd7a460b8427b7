"""What the tests need to know about the TPU target."""

import base64
import contextlib
import io
import re

import jax
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

NAME = "tpu"
# Strict interpretation: two simulated TensorCores split the "parallel" grid
# axes between them (with the default one core nothing runs concurrently and no
# race can be seen), visited in a seeded random order; a data race between them
# raises; memory the kernel did not write reads as NaN, so a missing write or an
# unmasked edge fails a test; a block read past an array's end raises.
#
# on_race="raise" is JAX 0.12's: the interpreters of JAX 0.10 and 0.11 print
# "RACE DETECTED" and carry on, so run_strict reads what they print.
RAISES_ON_RACE = "on_race" in pltpu.InterpretParams.__dataclass_fields__
STRICT = pltpu.InterpretParams(
    detect_races=True,
    num_cores_or_threads=2,
    random_seed=7,
    uninitialized_memory="nan",
    out_of_bounds_reads="raise",
    **({"on_race": "raise"} if RAISES_ON_RACE else {}),
)


class RaceDetected(RuntimeError):
    """A data race that an interpreter without on_race (JAX 0.10, 0.11) printed."""


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


# An error inside the TPU interpreter (a race, say) leaves its global state
# dirty: reset it before the next kernel runs.
reset_strict = pltpu.reset_tpu_interpret_mode_state
# The custom call a lowered kernel becomes.
KERNEL_CALL = "tpu_custom_call"
# TPU tiles are (8, 128): block_k=100 is neither a multiple of 128 nor the full k=300.
BAD_BLOCKS = {"block_k": 100}
BAD_LOWERING = "divisible by 8 and 128"
# Blocks the forward accepts and a backward matmul does not: block_k=8 spans all
# of k=8, but da = dz @ b^T contracts over n=100, where 8 is neither a multiple
# of 128 nor the whole axis. (shape (m, k, n), blocks)
BACKWARD_ONLY_BAD = ((8, 8, 100), {"block_k": 8})


def lower(fn, *args) -> str:
    """Lower for a TPU on this host: no TPU needed."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def mosaic_modules(fn, *args) -> list[str]:
    """The Mosaic module of each kernel in fn(*args) lowered for a TPU on this
    host (no TPU needed), as text: what the TPU's compiler would get. Each
    tpu_custom_call carries its module as base64 MLIR bytecode in its
    backend_config; read back with the TPU dialect that jaxlib ships (a
    private module: JAX 0.10 to 0.12 have it at jax._src.lib.tpu)."""
    from jax._src.lib import tpu
    from jax._src.lib.mlir import ir

    bodies = re.findall(r"\\22body\\22: \\22([A-Za-z0-9+/=]+)\\22", lower(fn, *args))
    modules = []
    for body in bodies:
        with ir.Context() as context:
            tpu.register_dialect(context)
            context.allow_unregistered_dialects = True
            modules.append(str(ir.Module.parse(base64.b64decode(body))))
    return modules


# How a Mosaic matmul asks for what each float32 input keeps (tests/op_spec.py's
# matmul_inputs; compare.MATMUL_INPUT_BITS): float32's 24 bits, or one
# bfloat16 pass, Mosaic's default (no attribute).
MOSAIC_PRECISION = {"float32": "#tpu.contract_precision<fp32>", "bfloat16": None}


def present() -> bool:
    return jax.default_backend() == "tpu"


# --- jax.export ----------------------------------------------------------------------
EXPORT_PLATFORM = "tpu"
EXPORT_DISABLED_CHECKS = ()  # tpu_custom_call is on jax.export's list of stable calls
# A symbolic batch works when it is a whole number of row blocks: the kernel
# clamps block_m to m (min(block_m, m)), which a bare symbolic m cannot answer.
SYMBOLIC_BATCH = "128*b"
SYMBOLIC_BATCH_ERROR = None


# The device an export from this host is for, described to JAX (no such
# device here): the op reads the block table for its kind.
DEVICE = AbstractDevice(device_kind="TPU v5 lite", num_cores=None, platform="tpu")


def export_context():
    return jax.sharding.use_abstract_mesh(
        AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=DEVICE)
    )


# Where the conformance cells lower the op ("kernel") from this host
# (OpSpec.platforms), and what the program holds there: lowered for a TPU,
# the Mosaic kernel.
PLATFORMS = {"cpu": "", "tpu": KERNEL_CALL}

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
# adds them after the op's own refusals): none. Pallas's TPU interpreter runs
# them all, and the kernel lowers symbolic sizes.
BACKEND_REFUSALS = {}

# A kernel whose block spans the row whole (the skeleton's): any row here
# (Mosaic TPU takes a block equal to the whole axis).
WHOLE_ROW_REFUSALS = {}
