"""Shared test setup.

The tests compare float32 with float64, so float64 must be enabled before any test builds an
array. Every array in the tests gets an explicit dtype, so this does not change what the
float32 tests compute.

The tests run on the CPU device whatever the host (the default device below). They check the
math of the implicit gradient, not an accelerator's arithmetic: float64 on a TPU is emulated
(not IEEE, results hundreds of float64 ulps off), float32 matmuls there default to one bfloat16
pass, and the second-order `check_grads` of an eager fixed-point solve, thousands of small
dispatches, took minutes there. bench.py is what times the default device.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from deq import init_params

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_device", "cpu")


@pytest.fixture
def make_problem():
    """Factory for a seeded DEQ problem: (params, x, cotangent) in the given dtype.

    The tests' loss is sum(cotangent * z*), whose gradient is exactly the VJP with this fixed
    random cotangent, the quantity the NumPy oracle computes directly.
    """

    def make(dtype, *, batch=4, hidden=16, features=8, contraction=0.7, seed=0):
        rng = np.random.default_rng(seed)
        params = init_params(rng, hidden, features, contraction=contraction, dtype=dtype)
        x = jnp.asarray(rng.standard_normal((batch, features)), dtype=dtype)
        cotangent = jnp.asarray(rng.standard_normal((batch, hidden)), dtype=dtype)
        return params, x, cotangent

    return make
