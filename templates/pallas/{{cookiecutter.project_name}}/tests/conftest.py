import zlib

import jax
import numpy as np
import pytest

from oracle import WORST

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
