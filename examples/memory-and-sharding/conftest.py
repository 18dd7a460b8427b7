"""Shared test setup: eight simulated CPU devices, float64, seeded randomness.

`jax_num_cpu_devices` only takes effect before JAX starts its backend, which is why it is set
here: pytest imports conftest.py before the test modules, and nothing before it touches a
device. (XLA_FLAGS=--xla_force_host_platform_device_count=8 does the same.) float64 is for the
float64 cases; every array the tests build has an explicit dtype.
"""

import zlib

import jax
import numpy as np
import pytest
from reference import WORST

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's id: random data, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_terminal_summary(terminalreporter):
    if WORST["test"]:
        terminalreporter.write_line(
            f"wave2d: worst error {100 * WORST['fraction']:.1f}% of its bound, in {WORST['test']}"
        )
