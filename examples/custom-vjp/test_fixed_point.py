"""The generic solver: a closed-form case, the pins that justify the custom VJP, failure modes
(non-convergence must give NaN) and input validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from deq import DEQParams, cell, deq_layer
from fixed_point import fixed_point, iterate_to_fixed_point
from reference import numpy_deq_solution

F32, F64 = np.float32, np.float64
TOL = {F32: 1e-5, F64: 1e-11}


# --- a linear map, where everything has a closed form ----------------------------------------


def linear_map(params, x, z):
    return params["A"] @ z + x


def make_linear_problem(n=5, seed=10):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= 0.6 / np.linalg.norm(A, 2)
    return A, rng.standard_normal(n), rng.standard_normal(n)


def test_linear_fixed_point_value_and_gradients_in_closed_form():
    """z* = (I - A)^-1 x; for L = c . z*: dL/dx = u and dL/dA = u z*^T with (I - A)^T u = c.

    Uses a dict as params, so the solver is checked as generic over pytrees, not just the DEQ.
    """
    A, x, c = make_linear_problem()
    eye = np.eye(len(x))
    z_exact = np.linalg.solve(eye - A, x)
    u_exact = np.linalg.solve((eye - A).T, c)

    def loss(params, x_):
        z = fixed_point(linear_map, params, x_, jnp.zeros(len(x), F64), tol=1e-13, max_iter=2000)
        return jnp.dot(jnp.asarray(c, F64), z), z

    params = {"A": jnp.asarray(A, F64)}
    (_, z), (g_params, g_x) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
        params, jnp.asarray(x, F64)
    )
    np.testing.assert_allclose(z, z_exact, rtol=0, atol=1e-11)
    np.testing.assert_allclose(g_x, u_exact, rtol=0, atol=1e-11)
    np.testing.assert_allclose(g_params["A"], np.outer(u_exact, z_exact), rtol=0, atol=1e-11)


def test_gradient_with_respect_to_initial_guess_is_zero():
    A, x, _ = make_linear_problem()
    params, x = {"A": jnp.asarray(A, F64)}, jnp.asarray(x, F64)

    def loss(z0):
        return jnp.sum(fixed_point(linear_map, params, x, z0, tol=1e-12, max_iter=2000))

    z0 = jnp.asarray(np.random.default_rng(11).standard_normal(len(x)), F64)
    np.testing.assert_array_equal(jax.grad(loss)(z0), np.zeros(len(x)))


# --- pins: why the custom VJP is needed, and what it gives up ---------------------------------


def test_reverse_mode_through_a_plain_while_loop_raises(make_problem):
    params, x, _ = make_problem(F32, batch=1)
    z0 = jnp.zeros(params.W.shape[0], F32)

    def loss(W):
        step = lambda z: cell(params._replace(W=W), x[0], z)  # noqa: E731
        return jnp.sum(iterate_to_fixed_point(step, z0, 1e-5, 1000))

    assert np.isfinite(loss(params.W))  # the plain loop solves fine; only its gradient fails
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for"):
        jax.grad(loss)(params.W)


def test_forward_mode_raises_type_error(make_problem):
    params, x, _ = make_problem(F32)

    def layer(x_):
        return deq_layer(params, x_, tol=1e-5, max_iter=1000)

    expected = r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"
    with pytest.raises(TypeError, match=expected):
        jax.jvp(layer, (x,), (jnp.ones_like(x),))


# --- non-convergence is NaN, never a silent wrong answer -------------------------------------


def loss_and_grads(params, x, dtype, max_iter=1000):
    def loss(p, x_):
        return jnp.sum(deq_layer(p, x_, tol=TOL[dtype], max_iter=max_iter))

    z = deq_layer(params, x, tol=TOL[dtype], max_iter=max_iter)
    return z, jax.grad(loss, argnums=(0, 1))(params, x)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_non_contractive_map_gives_nan_value_and_gradients(make_problem, dtype):
    params, x, _ = make_problem(dtype)
    # W = -3 I: the fixed point is repelling (slope about -3), so iterates settle into a
    # two-cycle instead. The NumPy oracle confirms no fixed point is reached by iteration.
    params = params._replace(W=-3.0 * jnp.eye(params.W.shape[0], dtype=dtype))
    with pytest.raises(RuntimeError, match="did not converge"):
        numpy_deq_solution(params, x, max_iter=5000)
    z, grads = loss_and_grads(params, x, dtype)
    assert np.all(np.isnan(z))
    for g in jax.tree.leaves(grads):
        assert np.all(np.isnan(g))


def test_too_few_iterations_give_nan_not_a_partial_answer(make_problem):
    params, x, _ = make_problem(F32)
    assert np.all(np.isfinite(deq_layer(params, x, tol=1e-5, max_iter=1000)))
    z, grads = loss_and_grads(params, x, F32, max_iter=3)
    assert np.all(np.isnan(z))
    for g in jax.tree.leaves(grads):
        assert np.all(np.isnan(g))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_diverging_adjoint_gives_nan_gradients_even_when_forward_converges(make_problem, dtype):
    params, _, _ = make_problem(dtype)
    hidden, features = params.U.shape
    # With b = 0 and x = 0, z* = 0 is reached at once; but there df/dz = W = 3 I, so the
    # adjoint u = v + 3 u blows up (and overflows to inf, which must not count as converged).
    params = params._replace(W=3.0 * jnp.eye(hidden, dtype=dtype), b=jnp.zeros(hidden, dtype))
    x = jnp.zeros((2, features), dtype)
    z, grads = loss_and_grads(params, x, dtype)
    np.testing.assert_array_equal(z, np.zeros((2, hidden)))
    for g in jax.tree.leaves(grads):
        assert np.all(np.isnan(g))


# --- input validation ------------------------------------------------------------------------


def _bad_deq_inputs():
    """(id, change(params, x) -> (params, x, kwargs), error type, message regex)."""
    ok = {"tol": 1e-5, "max_iter": 100}
    return [
        ("params-tuple", lambda p, x: (tuple(p), x, ok), TypeError, "DEQParams"),
        ("x-list", lambda p, x: (p, x.tolist(), ok), TypeError, "x must be an array"),
        ("x-int", lambda p, x: (p, x.astype(jnp.int32), ok), TypeError, "floating dtype"),
        ("mixed-dtype", lambda p, x: (p, x.astype(F64), ok), TypeError, "share one dtype"),
        ("W-not-square", lambda p, x: (p._replace(W=p.W[:, :-1]), x, ok), ValueError, "square"),
        ("U-rows", lambda p, x: (p._replace(U=p.U[:-1]), x, ok), ValueError, "U must have"),
        ("b-shape", lambda p, x: (p._replace(b=p.b[:-1]), x, ok), ValueError, "b must have"),
        ("x-1d", lambda p, x: (p, x[0], ok), ValueError, r"x must have shape \(batch, 8\)"),
        ("x-features", lambda p, x: (p, x[:, :-1], ok), ValueError, r"\(batch, 8\)"),
        ("tol-zero", lambda p, x: (p, x, {**ok, "tol": 0.0}), ValueError, "tol must be > 0"),
        ("tol-nan", lambda p, x: (p, x, {**ok, "tol": float("nan")}), ValueError, "tol must be"),
        ("tol-array", lambda p, x: (p, x, {**ok, "tol": jnp.float32(1e-5)}), TypeError, "tol"),
        ("tol-too-small", lambda p, x: (p, x, {**ok, "tol": 1e-9}), ValueError, "float32"),
        ("max-iter-0", lambda p, x: (p, x, {**ok, "max_iter": 0}), ValueError, "max_iter.*>= 1"),
        ("max-iter-float", lambda p, x: (p, x, {**ok, "max_iter": 10.0}), TypeError, "max_iter"),
        ("max-iter-bool", lambda p, x: (p, x, {**ok, "max_iter": True}), TypeError, "max_iter"),
    ]


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [case[1:] for case in _bad_deq_inputs()],
    ids=[case[0] for case in _bad_deq_inputs()],
)
def test_deq_layer_rejects_bad_inputs(make_problem, change, error, match):
    params, x, _ = make_problem(F32)
    params, x, kwargs = change(params, x)
    with pytest.raises(error, match=match):
        deq_layer(params, x, **kwargs)


def test_deq_layer_validation_accepts_good_inputs_under_jit(make_problem):
    params, x, _ = make_problem(F32)
    z = jax.jit(lambda p, x_: deq_layer(p, x_, tol=1e-5, max_iter=100))(params, x)
    assert z.shape == (x.shape[0], params.W.shape[0])
    assert np.all(np.isfinite(z))


@pytest.mark.parametrize(
    ("f", "params", "z0", "error", "match"),
    [
        ("not callable", {"A": jnp.eye(2, dtype=F32)}, jnp.zeros(2, F32), TypeError, "callable"),
        (linear_map, {}, jnp.zeros(2, F32), ValueError, "at least one array"),
        (linear_map, {"A": jnp.eye(2, dtype=F32)}, [0.0, 0.0], TypeError, "z0 must be an array"),
        (
            lambda p, x, z: (p["A"] @ z + x).astype(F64),
            {"A": jnp.eye(2, dtype=F32)},
            jnp.zeros(2, F32),
            TypeError,
            "z0's dtype",
        ),
        (
            lambda p, x, z: (p["A"] @ z + x)[:1],
            {"A": jnp.eye(2, dtype=F32)},
            jnp.zeros(2, F32),
            ValueError,
            r"z0's shape \(2,\)",
        ),
    ],
    ids=["f-not-callable", "empty-params", "z0-list", "f-dtype", "f-shape"],
)
def test_fixed_point_rejects_bad_inputs(f, params, z0, error, match):
    with pytest.raises(error, match=match):
        fixed_point(f, params, jnp.ones(2, F32), z0, tol=1e-5, max_iter=10)


def test_fixed_point_rejects_mixed_param_dtypes():
    params = DEQParams(jnp.eye(2, dtype=F32), jnp.eye(2, dtype=F64), jnp.zeros(2, F32))
    with pytest.raises(TypeError, match="share one floating dtype"):
        fixed_point(cell, params, jnp.ones(2, F32), jnp.zeros(2, F32), tol=1e-5, max_iter=10)
