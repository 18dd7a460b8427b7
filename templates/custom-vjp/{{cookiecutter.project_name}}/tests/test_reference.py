"""Check the oracle itself against float64 NumPy: a jitted reference can be
wrong too (compiler bugs, precision), and every other test trusts it."""

import jax
import jax.numpy as jnp
import pytest

from {{ cookiecutter.package_name }} import pairwise_distances_reference

from compare import assert_close
from oracle import (
    DISTANCES,
    GRADIENTS,
    HESSIANS,
    distances_f64,
    distances_hessian_f64,
    distances_vjp_f64,
    shape_id,
)

SHAPES = [(1, 1, 1), (3, 5, 2), (33, 17, 8), (4096, 2, 3), (64, 64, 256)]


def points(rng, n, k, dtype, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal((n, k)), dtype=dtype)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_values_match_numpy(rng, shape, dtype, jit):
    n, m, k = shape
    x, y = points(rng, n, k, dtype), points(rng, m, k, dtype)
    f = jax.jit(pairwise_distances_reference) if jit else pairwise_distances_reference
    assert_close(f(x, y), distances_f64(x, y), DISTANCES)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_gradient_matches_numpy(rng, shape, dtype):
    # Random points never coincide, so the reference's gradient is defined.
    n, m, k = shape
    x, y = points(rng, n, k, dtype), points(rng, m, k, dtype)
    cotangent = jnp.asarray(rng.standard_normal((n, m)), dtype)

    def loss(x, y):
        return jnp.sum(cotangent * pairwise_distances_reference(x, y))

    gx, gy = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, y)
    want_x, want_y = distances_vjp_f64(x, y, cotangent)
    assert_close(gx, want_x, GRADIENTS)
    assert_close(gy, want_y, GRADIENTS)


@pytest.mark.parametrize("shape", SHAPES[1:3], ids=shape_id)
def test_reference_hessian_matches_numpy(rng, shape):
    # Away from coincident points the NumPy Hessian, which the op's second
    # derivatives are graded by, must be plain autodiff's. (Not with one
    # feature: |u| is then linear on each side and its Hessian all zeros.)
    n, m, k = shape
    x, y = points(rng, n, k, "float64"), points(rng, m, k, "float64")
    weights = jnp.asarray(rng.standard_normal((n, m)))

    def loss(x, y):
        return jnp.sum(weights * pairwise_distances_reference(x, y))

    got = jax.jit(jax.hessian(loss, argnums=(0, 1)))(x, y)
    for got_row, want_row in zip(got, distances_hessian_f64(x, y, weights), strict=True):
        for g, w in zip(got_row, want_row, strict=True):
            assert_close(g, w, HESSIANS)
