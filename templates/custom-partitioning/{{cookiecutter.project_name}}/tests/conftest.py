import zlib

import jax
import numpy as np
import pytest

from oracle import WORST

# Eight simulated CPU devices for the sharding tests. This must run before JAX
# starts its backend, which is why it is here: pytest imports conftest.py
# before any test module. (XLA_FLAGS=--xla_force_host_platform_device_count=8
# does the same.)
jax.config.update("jax_num_cpu_devices", 8)
# float64 is needed for the float64 cases and for check_grads' finite
# differences. Tests always pass explicit dtypes, so float32 stays float32.
jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's name: random, yet reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_terminal_summary(terminalreporter):
    if WORST["test"]:
        terminalreporter.write_line(
            f"oracle: worst error {WORST['error']:.2e} "
            f"({100 * WORST['fraction']:.1f}% of tolerance) in {WORST['test']}"
        )
