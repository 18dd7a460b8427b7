"""The oracles themselves, checked against each other and against finite differences. These
need no compiled module, so they run (and must pass) even where the FFI tests skip."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from heat import crank_nicolson, grid, sine_mode_exact
from reference import (
    dense_matrix,
    lax_tridiagonal_solve,
    numpy_solve,
    numpy_vjp,
    random_system,
    scan_tridiagonal_solve,
)

F32, F64 = np.float32, np.float64
TOL = {F32: 2e-6, F64: 1e-13}  # max error relative to max |x|
JAX_SOLVERS = {"lax": lax_tridiagonal_solve, "scan": scan_tridiagonal_solve}


def relative_error(got, want):
    want = np.asarray(want, F64)
    return np.max(np.abs(np.asarray(got, F64) - want)) / np.max(np.abs(want))


def test_numpy_solution_satisfies_the_system(rng):
    system = random_system(rng, (3, 9), F64)
    x = numpy_solve(*system)
    residual = np.einsum("...ij,...j->...i", dense_matrix(*system[:3]), x) - system[3]
    assert np.max(np.abs(residual)) < 1e-13


def test_numpy_vjp_matches_central_finite_differences(rng):
    system = [np.asarray(a, F64) for a in random_system(rng, (6,), F64)]
    x_bar = rng.standard_normal(6)
    grads = numpy_vjp(*system, x_bar)
    eps = 1e-6
    for which, grad in enumerate(grads):
        for i in range(6):
            plus = [a.copy() for a in system]
            minus = [a.copy() for a in system]
            plus[which][i] += eps
            minus[which][i] -= eps
            fd = (x_bar @ numpy_solve(*plus) - x_bar @ numpy_solve(*minus)) / (2 * eps)
            assert abs(fd - grad[i]) < 1e-7, (which, i)


@pytest.mark.parametrize("solver", JAX_SOLVERS)
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(1,), (2,), (9,), (4, 3), (2, 3, 50)], ids=str)
def test_jax_oracles_match_numpy(solver, dtype, shape, rng):
    system = random_system(rng, shape, dtype)
    x = JAX_SOLVERS[solver](*system)
    assert x.dtype == dtype
    assert x.shape == shape
    assert relative_error(x, numpy_solve(*system)) < TOL[dtype]


@pytest.mark.parametrize("solver", JAX_SOLVERS)
def test_jax_oracle_gradients_match_numpy(solver, rng):
    system = random_system(rng, (3, 8), F64)
    x_bar = jnp.asarray(rng.standard_normal((3, 8)), F64)
    grads = jax.grad(lambda *s: jnp.sum(x_bar * JAX_SOLVERS[solver](*s)), argnums=(0, 1, 2, 3))(
        *system
    )
    for got, want in zip(grads, numpy_vjp(*system, x_bar), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.max(np.abs(want)))


def test_heat_closed_form_matches_the_simulation_and_the_pde():
    n, kappa, dt, steps = 31, 0.5, 1e-3, 200
    x, _ = grid(n)
    u0 = jnp.sin(jnp.pi * x)
    exact, _ = sine_mode_exact(n, kappa, dt, steps)
    u = crank_nicolson(lax_tridiagonal_solve, u0, kappa, dt, steps)
    np.testing.assert_allclose(u, exact, rtol=0, atol=1e-13)
    # ...and the discrete solution is close to the PDE's, exp(-kappa pi^2 t) sin(pi x).
    pde = np.exp(-kappa * np.pi**2 * dt * steps) * np.sin(np.pi * np.asarray(x))
    assert np.max(np.abs(exact - pde)) < 1e-3
