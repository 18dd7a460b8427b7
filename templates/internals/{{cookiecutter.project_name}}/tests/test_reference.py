"""Check the oracle itself against float64 NumPy: a jitted reference can be
wrong too (compiler bugs, precision), and every other test trusts it."""

import jax
import jax.numpy as jnp
import pytest

from {{ cookiecutter.package_name }} import tridiagonal_matvec_reference

from compare import assert_close
from oracle import GRADIENTS, VALUES, shape_id, tridiagonal_matvec_f64, tridiagonal_matvec_vjp_f64

SHAPES = [(1,), (2,), (7,), (3, 33), (2, 3, 64)]


def operands(rng, shape, dtype):
    return [jnp.asarray(rng.standard_normal(shape), dtype) for _ in range(4)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_values_match_numpy(rng, shape, dtype, jit):
    args = operands(rng, shape, dtype)
    f = jax.jit(tridiagonal_matvec_reference) if jit else tridiagonal_matvec_reference
    assert_close(f(*args), tridiagonal_matvec_f64(*args), VALUES)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_gradient_matches_numpy(rng, shape, dtype):
    args = operands(rng, shape, dtype)
    cotangent = jnp.asarray(rng.standard_normal(shape), dtype)

    def loss(*args):
        return jnp.sum(cotangent * tridiagonal_matvec_reference(*args))

    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(got, tridiagonal_matvec_vjp_f64(*args, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)
