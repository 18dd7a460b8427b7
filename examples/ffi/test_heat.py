"""The use case: Crank-Nicolson heat-equation steps with the FFI solver, values and the
gradient with respect to the diffusivity, against a closed form and the plain-JAX solver."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from heat import crank_nicolson, grid, sine_mode_exact
from reference import lax_tridiagonal_solve

tridiagonal = pytest.importorskip("tridiagonal", exc_type=ImportError)
solve = tridiagonal.tridiagonal_solve

N, DT, STEPS = 63, 1e-3, 100


@pytest.mark.parametrize(("dtype", "tol"), [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_sine_mode_decays_as_the_closed_form_says(dtype, tol):
    x, _ = grid(N, dtype)
    simulate = jax.jit(crank_nicolson, static_argnums=(0, 3, 4))
    u = simulate(solve, jnp.sin(jnp.pi * x), 0.7, DT, STEPS)
    exact, _ = sine_mode_exact(N, 0.7, DT, STEPS)
    assert u.dtype == dtype
    assert np.max(np.abs(np.asarray(u, np.float64) - exact)) < tol


def test_gradient_with_respect_to_diffusivity_matches_the_closed_form():
    x, _ = grid(N)
    mode = jnp.sin(jnp.pi * x)

    def projection(kappa):
        return jnp.sum(mode * crank_nicolson(solve, mode, kappa, DT, STEPS))

    _, du_dkappa = sine_mode_exact(N, 0.7, DT, STEPS)
    np.testing.assert_allclose(
        jax.grad(projection)(0.7), np.sum(np.asarray(mode) * du_dkappa), rtol=1e-11
    )


def test_batch_of_rods_with_their_own_diffusivity_matches_the_jax_solver(rng):
    u0 = jnp.asarray(rng.random((3, 4, N)), np.float64)
    kappa = jnp.asarray(rng.uniform(0.1, 2.0, (3, 4)), np.float64)

    def loss(solver, kappa):
        return jnp.sum(crank_nicolson(solver, u0, kappa, DT, STEPS) ** 2)

    got = jax.value_and_grad(lambda k: loss(solve, k))(kappa)
    want = jax.value_and_grad(lambda k: loss(lax_tridiagonal_solve, k))(kappa)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11)
