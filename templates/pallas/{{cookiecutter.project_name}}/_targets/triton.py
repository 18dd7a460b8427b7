"""What the tests need to know about the Triton (GPU) target."""

import jax
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

NAME = "gpu"
# Triton kernels have only the plain interpreter: no race detector, no
# poisoned memory. Masked loads and stores are what keep edges correct.
STRICT = True
KERNEL_CALL = "__gpu$xla.gpu.triton"
BAD_BLOCKS = {"block_m": 96}  # Triton needs power-of-two block sizes
BAD_LOWERING = "power of 2"

# Lowering for a GPU on a host without one needs an abstract GPU device.
_H100 = AbstractDevice(device_kind="NVIDIA H100", num_cores=None, platform="gpu")
_MESH = AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=_H100)


def lower(fn, *args) -> str:
    with jax.sharding.use_abstract_mesh(_MESH):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def present() -> bool:
    return jax.default_backend() == "gpu"


def reset_strict():
    """Nothing to do: the plain interpreter keeps no state between kernels."""
