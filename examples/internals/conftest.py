"""Shared test setup: float64 and seeded randomness.

The tests compare float32 with float64, so float64 must be enabled before any test builds an
array; every array the tests build has an explicit dtype.
"""

import zlib

import jax
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's id: random data, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
