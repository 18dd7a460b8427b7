"""What the tests need to know about the Mosaic GPU target (Hopper)."""

import jax
from jax.experimental.pallas import mosaic_gpu as plgpu

NAME = "Hopper (sm_90a) GPU"
# Strict interpretation: a data race raises (for instance a TMA store reading
# SMEM that the threads wrote without plgpu.commit_smem), memory the kernel did
# not write reads as NaN, so a missing write fails a test, and an out-of-bounds
# read raises. The interpreter runs WGMMA synchronously: it does not check the
# wgmma_wait discipline. Unlike the TPU interpreter it has no thread count to
# raise: it sets num_cores_or_threads to the kernel's warpgroups (one here) and
# runs the grid's blocks one after another, so races between thread blocks
# cannot be seen; races with the TMA (its own simulated threads) can.
STRICT = plgpu.InterpretGPUParams(
    detect_races=True, on_race="raise", uninitialized_memory="nan", out_of_bounds_reads="raise"
)
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
