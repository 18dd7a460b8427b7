"""Shared test setup: eight simulated CPU devices, seeded randomness, and a clear word when the
FFI rung's compiled module is missing.

`jax_num_cpu_devices` only takes effect before JAX starts its backend: pytest imports
conftest.py before the test modules, and nothing before it touches a device.
"""

import zlib

import jax
import numpy as np
import pytest
from oracle import WORST

jax.config.update("jax_num_cpu_devices", 8)

try:
    import ffi_handler  # noqa: F401  (loads and registers the handlers, or says why not)

    FFI_MISSING = None
except ImportError as err:
    FFI_MISSING = str(err)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's id: random data, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_terminal_summary(terminalreporter):
    if WORST["test"]:
        terminalreporter.write_line(
            f"oracle: worst error {100 * WORST['fraction']:.1f}% of tolerance in {WORST['test']}"
        )
    if FFI_MISSING:
        terminalreporter.write_line(f"examples/ladder: FFI rung SKIPPED: {FFI_MISSING}")
