"""Check the oracle itself against float64 NumPy: a jitted reference can be
wrong too, and every other test trusts it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import top_k_reference

from compare import assert_close
from oracle import GRADIENTS, VALUES, top_k_f64, top_k_vjp_f64

CASES = [((1, 1), 1), ((3, 10), 3), ((16, 1024), 8), ((5000, 16), 2)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "k"), CASES, ids=str)
def test_reference_matches_numpy(rng, shape, k, dtype, jit):
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    f = jax.jit(top_k_reference, static_argnums=1) if jit else top_k_reference
    values, indices = f(x, k)
    want_values, want_indices = top_k_f64(x, k)
    np.testing.assert_array_equal(indices, want_indices)
    assert_close(values, want_values, VALUES)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "k"), CASES, ids=str)
def test_reference_gradient_matches_numpy(rng, shape, k, dtype):
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    cotangent = jnp.asarray(rng.standard_normal((shape[0], k)), dtype)
    grad = jax.jit(jax.grad(lambda x: jnp.sum(cotangent * top_k_reference(x, k)[0])))(x)
    assert_close(grad, top_k_vjp_f64(x, k, cotangent), GRADIENTS)
