"""Shared test setup: seeded inputs.

The kernels run in Pallas interpret mode on CPU (the default when the backend is not TPU), so
every test here runs anywhere; the few that need a real TPU skip themselves.
"""

import jax.numpy as jnp
import numpy as np
import pytest


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
