"""The devices an example's mesh is built from, for its tests and its bench.py; and the check
that an example's tests run on the CPU device whatever the host.

The same choice as the kit's templates (tests/conftest.py there): the default device's
platform where it has that many devices (a runner with 8 GPUs shards on them), else the
simulated CPU devices, so that a machine with one GPU still checks the sharding instead of
failing to build the mesh. Simulated CPU devices need jax.config.update("jax_num_cpu_devices",
8) before JAX starts its backend (each example's conftest.py and bench.py do that first).
"""

import jax
import jax.numpy as jnp

# The platforms whose meshes were simulated CPU devices instead (platform: its device count),
# for the test run's summary.
SIMULATED_MESHES: dict[str, int] = {}


def mesh_devices(count):
    """`count` devices of the default device's platform if it has them, else CPU devices."""
    default = jax.config.jax_default_device
    platform = getattr(default, "platform", default)  # a Device, a name, or None
    devices = jax.devices(platform) if platform else jax.devices()
    if len(devices) >= count:
        return devices[:count]
    if devices[0].platform != "cpu":
        SIMULATED_MESHES[devices[0].platform] = len(devices)
    return jax.devices("cpu")[:count]


def assert_the_default_device_is_the_cpu():
    """What an example's conftest.py sets so that on a host whose default backend is an
    accelerator (a TPU: emulated float64, bfloat16-pass float32 matmuls) its tests still check
    the math at the tolerances they declare."""
    default = jax.config.jax_default_device
    assert getattr(default, "platform", default) == "cpu"
    assert jnp.zeros((), jnp.float64).devices() == {jax.devices("cpu")[0]}
