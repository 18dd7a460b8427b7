"""What the tests need to know about the TPU target."""

import jax
from jax.experimental.pallas import tpu as pltpu

NAME = "tpu"
# Strict interpretation: a data race raises, and memory the kernel did not
# write reads as NaN, so a missing write or an unmasked edge fails a test.
STRICT = pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan")
# The custom call a lowered kernel becomes.
KERNEL_CALL = "tpu_custom_call"
# TPU tiles are (8, 128): block_k=100 is neither a multiple of 128 nor the full k=300.
BAD_BLOCKS = {"block_k": 100}
BAD_LOWERING = "divisible by 8 and 128"


def lower(fn, *args) -> str:
    """Lower for a TPU on this host: no TPU needed."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def present() -> bool:
    return jax.default_backend() == "tpu"
