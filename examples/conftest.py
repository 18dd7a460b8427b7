"""What every example's tests share. pytest loads this file before an example's own
conftest.py, and puts this folder (examples/) on sys.path for it, as it puts each example's
folder there for its tests: so the tests import the helpers in shared/ as `shared.<module>`.
After the run it prints the worst error / bound each example's comparisons recorded."""

import zlib

import numpy as np
import pytest
from shared.worst import Worst


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's id: random data, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_terminal_summary(terminalreporter):
    for worst in Worst.made:
        if worst.test:
            terminalreporter.write_line(worst.summary())
