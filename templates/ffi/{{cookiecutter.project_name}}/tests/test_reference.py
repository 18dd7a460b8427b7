"""Check the oracle itself against float64 NumPy: a jitted reference can be
wrong too (compiler bugs, precision), and every other test trusts it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import rms_norm_reference

from compare import assert_close
from oracle import GRADIENTS, VALUES, rms_norm_f64, rms_norm_vjp_f64, shape_id

# Ranks 1 to 4, size-1 axes, and 4096+ rows: XLA:CPU in jaxlib 0.11.1 to
# 0.12.0.1 miscompiles jit(grad) of the rsqrt form from 4096 rows on.
SHAPES = [(1,), (7,), (1, 1), (3, 1), (5, 33), (4096, 8), (4100, 3), (2, 1, 6, 5), (64, 512)]
DTYPES = ["float32", "float64", "bfloat16"]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_values_match_numpy(rng, shape, dtype, jit):
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    f = jax.jit(rms_norm_reference) if jit else rms_norm_reference
    assert_close(f(x), rms_norm_f64(x), VALUES)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [s for s in SHAPES if s[-1] > 1], ids=shape_id)
def test_reference_gradient_matches_numpy(rng, shape, dtype):
    # Rows of length 1 are left out: there the two terms of the gradient
    # cancel to ~eps / x**3, which no float32 computation resolves.
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    cotangent = jnp.asarray(rng.standard_normal(shape), dtype)

    def loss(x):
        return jnp.sum(cotangent * rms_norm_reference(x))

    got = jax.jit(jax.grad(loss))(x)
    assert_close(got, rms_norm_vjp_f64(x, cotangent), GRADIENTS)


def test_reference_eps_dominates_tiny_rows():
    x = np.full((2, 4), 1e-5)
    assert_close(rms_norm_reference(x, eps=1e-2), rms_norm_f64(x, eps=1e-2), VALUES)
