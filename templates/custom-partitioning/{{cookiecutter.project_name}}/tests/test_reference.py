"""Check the oracle itself against float64 NumPy: a jitted reference can be
wrong too, and every other test trusts it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}_reference as top_k_reference

from compare import assert_close
from oracle import GRADIENTS, VALUES, top_k_f64, top_k_vjp_f64

CASES = [((1, 1), 1), ((3, 10), 3), ((16, 1024), 8), ((5000, 16), 2)]

# Jitted at every size: XLA compiles the whole function into fused loops, and
# that is where a compiled reference can go wrong at one size and not another.
# Eagerly at one odd size: each operation then runs alone, unfused, and each
# compiles again for every new shape, so more sizes would cost compiles and
# check the same operations again.
RUNS = [pytest.param(shape, k, True, id=f"{shape}-{k}-jit") for shape, k in CASES]
RUNS += [pytest.param((3, 10), 3, False, id="(3, 10)-3-eager")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "k", "jit"), RUNS)
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
