"""Shared test setup: the CPU as the default device, seeded inputs.

Every test runs on the CPU device, whatever the host, except those marked `on_tpu` (the
compiled kernels on a real TPU; they skip themselves elsewhere). There the kernels run in
Pallas interpret mode (flash_attention.default_interpret: the default device is not a TPU), and
the oracles compute at the CPU's IEEE float32. On a TPU host this matters: a compiled Mosaic
kernel cannot take CPU inputs, and the TPU interpreter, run on the TPU, reports NaNs and no
races (it is meant for the CPU).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "on_tpu: runs on the default device (a TPU), not on the CPU device"
    )


@pytest.fixture(autouse=True)
def cpu_unless_on_tpu(request):
    """The CPU as the default device for the test, unless it is marked on_tpu."""
    if request.node.get_closest_marker("on_tpu"):
        yield
    else:
        with jax.default_device(jax.devices("cpu")[0]):
            yield


@pytest.fixture
def make_inputs():
    """Factory for seeded (q, k, v, do) with q, do (*lead, lq, d) and k, v (*lead, lk, d).

    `do` is a fixed random output cotangent: the gradients the tests compare are the VJP
    with it, i.e. the gradient of sum(do * attention(q, k, v)).
    """

    def make(lq, lk, d, dtype, *, lead=(2,), seed=0):
        rng = np.random.default_rng(seed)

        def draw(length):
            return jnp.asarray(rng.standard_normal((*lead, length, d)), dtype=dtype)

        return draw(lq), draw(lk), draw(lk), draw(lq)

    return make
