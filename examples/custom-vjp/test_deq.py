"""The DEQ layer against its oracles: values, gradients, transformations and memory."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from deq import cell, deq_layer, init_params
from jax.test_util import check_grads
from reference import deq_layer_unrolled, numpy_deq_grads, numpy_deq_solution
from shared.devices import assert_the_default_device_is_the_cpu

DTYPES = [np.float32, np.float64]
# Relative stopping tolerance per dtype: ~80 float32 epsilons; ~45000 float64 epsilons.
TOL = {np.float32: 1e-5, np.float64: 1e-11}
MAX_ITER = 1000
# The reference runs a fixed count: with ||W||_2 = 0.7 the error after 200 steps is below
# 0.7**200 ~ 1e-31, far under float64 resolution, so it is "converged" in either dtype.
UNROLL = 200


def implicit_layer(dtype):
    return lambda params, x: deq_layer(params, x, tol=TOL[dtype], max_iter=MAX_ITER)


def unrolled_layer(params, x):
    return deq_layer_unrolled(params, x, UNROLL)


def grads_of(layer, params, x, cotangent):
    """Gradients of sum(cotangent * layer(params, x)) w.r.t. params (W, U, b) and x."""
    return jax.grad(lambda p, x_: jnp.sum(cotangent * layer(p, x_)), argnums=(0, 1))(params, x)


def as_named_leaves(grads):
    grad_params, grad_x = grads
    return {"W": grad_params.W, "U": grad_params.U, "b": grad_params.b, "x": grad_x}


def assert_close_scaled(actual, expected, rel):
    """Every entry within rel * max|expected|: gradients mix small and large entries, so a pure
    elementwise rtol would be dominated by the near-zero ones."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = np.max(np.abs(expected))
    assert scale > 0, "oracle gradient is identically zero, the comparison would be vacuous"
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=0, atol=rel * scale)


# --- forward ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_solution_is_a_fixed_point(make_problem, dtype):
    params, x, _ = make_problem(dtype)
    z = deq_layer(params, x, tol=TOL[dtype], max_iter=MAX_ITER)
    assert z.dtype == dtype
    assert z.shape == (x.shape[0], params.W.shape[0])
    residual = jax.vmap(cell, in_axes=(None, 0, 0))(params, x, z) - z
    # The stopping test bounds each example's last step by tol * max|z|; one more contractive
    # step can only shrink it (factor 2: rounding in computing the residual itself).
    bound = 2 * TOL[dtype] * np.max(np.abs(z), axis=1)
    assert np.all(np.max(np.abs(residual), axis=1) <= bound)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_matches_unrolled_reference(make_problem, dtype):
    params, x, _ = make_problem(dtype)
    z = deq_layer(params, x, tol=TOL[dtype], max_iter=MAX_ITER)
    z_ref = unrolled_layer(params, x)
    # Contraction L = 0.7, last step <= tol * max|z| <= tol (tanh): so the distance to z* is
    # at most L / (1 - L) * tol ~ 2.3 tol.
    np.testing.assert_allclose(z, z_ref, rtol=0, atol=10 * TOL[dtype])


def test_unrolled_reference_matches_float64_numpy(make_problem):
    """Check the JAX oracle itself against code that shares nothing with JAX."""
    params, x, cotangent = make_problem(np.float64)
    np.testing.assert_allclose(
        unrolled_layer(params, x), numpy_deq_solution(params, x), rtol=0, atol=1e-13
    )
    ref = as_named_leaves(grads_of(unrolled_layer, params, x, cotangent))
    oracle = as_named_leaves(numpy_deq_grads(params, x, cotangent))
    for name in oracle:
        assert_close_scaled(ref[name], oracle[name], rel=1e-12)


# --- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_match_unrolled_autodiff_and_numpy(make_problem, dtype):
    params, x, cotangent = make_problem(dtype)
    implicit = as_named_leaves(grads_of(implicit_layer(dtype), params, x, cotangent))
    unrolled = as_named_leaves(grads_of(unrolled_layer, params, x, cotangent))
    oracle = as_named_leaves(numpy_deq_grads(params, x, cotangent))
    # The implicit gradient is exact at the computed z*, whose error is a few tol; 20 tol
    # relative leaves room without hiding an O(1) mistake.
    rel = 20 * TOL[dtype]
    for name in oracle:
        assert implicit[name].dtype == dtype, name
        assert_close_scaled(implicit[name], unrolled[name], rel)
        assert_close_scaled(implicit[name], oracle[name], rel)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_accuracy_does_not_depend_on_cotangent_scale(make_problem, dtype):
    """The adjoint has the cotangent's scale (tiny for a mean over a big batch); its stopping
    test must be relative, or it would stop at once with a wrong gradient."""
    params, x, cotangent = make_problem(dtype)
    tiny = cotangent * dtype(1e-6)
    implicit = as_named_leaves(grads_of(implicit_layer(dtype), params, x, tiny))
    oracle = as_named_leaves(numpy_deq_grads(params, x, tiny))
    for name in oracle:
        assert_close_scaled(implicit[name], oracle[name], 20 * TOL[dtype])


def test_check_grads_first_order_float64(make_problem):
    params, x, cotangent = make_problem(np.float64, batch=2, hidden=6, features=3)

    def loss(p, x_):
        return jnp.sum(cotangent * deq_layer(p, x_, tol=1e-12, max_iter=MAX_ITER))

    check_grads(loss, (params, x), order=1, modes=["rev"])


def test_check_grads_second_order_float64(make_problem):
    """Works because the backward rule solves the adjoint with the same custom_vjp solver."""
    params, x, cotangent = make_problem(np.float64, batch=2, hidden=5, features=3)

    def loss(p, x_):
        return jnp.sum(cotangent * jnp.sin(deq_layer(p, x_, tol=1e-12, max_iter=MAX_ITER)))

    check_grads(loss, (params, x), order=2, modes=["rev"])


# --- transformations -------------------------------------------------------------------------
# A transformed solve may stop one iteration earlier or later than the plain one (rounding can
# flip a convergence decision), so results agree to the solver tolerance, not bit for bit.
F32_VALUE_ATOL = 10 * TOL[np.float32]
F32_GRAD_REL = 20 * TOL[np.float32]


def test_jit_matches_eager(make_problem):
    params, x, _ = make_problem(np.float32)
    layer = implicit_layer(np.float32)
    np.testing.assert_allclose(
        jax.jit(layer)(params, x), layer(params, x), rtol=0, atol=F32_VALUE_ATOL
    )


def test_vmap_over_stacked_batches(make_problem):
    params, _, _ = make_problem(np.float32)
    xs = jnp.asarray(np.random.default_rng(1).standard_normal((3, 4, 8)), dtype=np.float32)
    layer = implicit_layer(np.float32)
    batched = jax.vmap(layer, in_axes=(None, 0))(params, xs)
    looped = jnp.stack([layer(params, x) for x in xs])
    np.testing.assert_allclose(batched, looped, rtol=0, atol=F32_VALUE_ATOL)


def test_vmap_of_grad_matches_per_slice_grad(make_problem):
    params, _, cotangent = make_problem(np.float32)
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((3, 4, 8)), dtype=np.float32)
    layer = implicit_layer(np.float32)

    def grad_fn(x):
        return grads_of(layer, params, x, cotangent)

    batched = jax.vmap(grad_fn)(xs)
    for i, x in enumerate(xs):
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(grad_fn(x)), strict=True):
            assert_close_scaled(got[i], want, F32_GRAD_REL)


def test_jit_of_grad_matches_eager_grad(make_problem):
    params, x, cotangent = make_problem(np.float32)
    layer = implicit_layer(np.float32)

    def loss(p, x_):
        return jnp.sum(cotangent * layer(p, x_))

    eager = jax.grad(loss, argnums=(0, 1))(params, x)
    jitted = jax.jit(jax.grad(loss, argnums=(0, 1)))(params, x)
    for got, want in zip(jax.tree.leaves(jitted), jax.tree.leaves(eager), strict=True):
        assert_close_scaled(got, want, F32_GRAD_REL)


# --- memory ----------------------------------------------------------------------------------


def compiled_temp_bytes(layer, params, x):
    def loss(p, x_):
        return jnp.mean(layer(p, x_) ** 2)

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, x).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_reverse_mode_memory_grows_with_iterations_only_when_unrolled():
    dtype, batch, hidden, features = np.float32, 8, 32, 16
    params = init_params(np.random.default_rng(3), hidden, features, contraction=0.7, dtype=dtype)
    x = jnp.asarray(np.random.default_rng(4).standard_normal((batch, features)), dtype=dtype)
    iterate_bytes = batch * hidden * np.dtype(dtype).itemsize  # one stored z_k for the batch
    short, long = 50, 200

    def unrolled_bytes(n):
        return compiled_temp_bytes(lambda p, x_: deq_layer_unrolled(p, x_, n), params, x)

    def implicit_bytes(n):
        return compiled_temp_bytes(lambda p, x_: deq_layer(p, x_, tol=1e-5, max_iter=n), params, x)

    unrolled = {n: unrolled_bytes(n) for n in (short, long)}
    implicit = {n: implicit_bytes(n) for n in (short, long)}
    # Reverse mode through the unrolled loop keeps at least one iterate per extra step ...
    assert unrolled[long] - unrolled[short] >= (long - short) * iterate_bytes, unrolled
    # ... while the implicit version's buffers do not depend on max_iter at all (allow less
    # than one iterate of slack for incidental layout changes).
    assert abs(implicit[long] - implicit[short]) < iterate_bytes, implicit
    assert implicit[long] < unrolled[short], (implicit, unrolled)


def test_the_tests_run_on_the_cpu_device_whatever_the_host():
    assert_the_default_device_is_the_cpu()  # as conftest.py sets it
