"""Oracles for the FFI tridiagonal solver, written without it.

1. `lax_tridiagonal_solve`: jax.lax.linalg.tridiagonal_solve, JAX's own (LAPACK gtsv on the
   CPU, with partial pivoting), differentiated by JAX's own rules.
2. `scan_tridiagonal_solve`: the same Thomas recurrence as the handler, in plain JAX with two
   lax.scan loops (all systems advance together in the carry); plain autodiff. What one writes
   without an FFI; the benchmark's second baseline.
3. `numpy_solve` / `numpy_vjp`: float64 NumPy on the assembled dense matrices
   (np.linalg.solve), independent of JAX and of any tridiagonal shortcut. The tests check
   oracles 1 and 2 and the FFI solver against it. Dense means O(n^2) memory: small n only.
4. `numpy_residual`: float64 A x - b in O(n), for systems too large to assemble. On the
   diagonally dominant systems of `random_system` (margin m) it bounds the error itself:
   max |x - x_exact| <= max |A x - b| / m.
"""

import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = [
    "dense_matrix",
    "lax_tridiagonal_solve",
    "numpy_residual",
    "numpy_solve",
    "numpy_vjp",
    "random_system",
    "scan_tridiagonal_solve",
]


def lax_tridiagonal_solve(dl, d, du, b):
    """jax.lax.linalg.tridiagonal_solve for one right-hand side per system (it wants b as
    (..., n, k))."""
    return lax.linalg.tridiagonal_solve(dl, d, du, b[..., None])[..., 0]


def scan_tridiagonal_solve(dl, d, du, b):
    """Thomas algorithm in plain JAX: a forward scan eliminates the lower diagonal, a reverse
    scan substitutes back. Scans run over the last axis, so the carry holds every system."""
    # The ignored ends are zeroed so that whatever they hold (even inf) cannot leak in.
    dl = dl.at[..., 0].set(0)
    du = du.at[..., -1].set(0)
    rows = tuple(jnp.moveaxis(a, -1, 0) for a in (dl, d, du, b))

    def eliminate(carry, row):
        upper_prev, y_prev = carry
        dl_i, d_i, du_i, b_i = row
        pivot = d_i - dl_i * upper_prev
        upper, y = du_i / pivot, (b_i - dl_i * y_prev) / pivot
        return (upper, y), (upper, y)

    zeros = jnp.zeros_like(rows[1][0])
    _, (upper, y) = lax.scan(eliminate, (zeros, zeros), rows)

    def substitute(x_next, row):
        upper_i, y_i = row
        x = y_i - upper_i * x_next
        return x, x

    _, x = lax.scan(substitute, zeros, (upper, y), reverse=True)
    return jnp.moveaxis(x, 0, -1)


def dense_matrix(dl, d, du):
    """float64 matrices (..., n, n) with the three diagonals; dl[..., 0], du[..., -1] dropped."""
    dl, d, du = (np.asarray(a, np.float64) for a in (dl, d, du))
    n = d.shape[-1]
    a = np.zeros((*d.shape, n))
    i = np.arange(n)
    a[..., i, i] = d
    a[..., i[1:], i[:-1]] = dl[..., 1:]
    a[..., i[:-1], i[1:]] = du[..., :-1]
    return a


def numpy_solve(dl, d, du, b):
    """float64 solution by a dense LU solve with partial pivoting."""
    b = np.asarray(b, np.float64)
    return np.linalg.solve(dense_matrix(dl, d, du), b[..., None])[..., 0]


def numpy_residual(dl, d, du, b, x):
    """float64 A x - b from the diagonals, without assembling A."""
    dl, d, du, b, x = (np.asarray(a, np.float64) for a in (dl, d, du, b, x))
    ax = d * x
    ax[..., 1:] += dl[..., 1:] * x[..., :-1]
    ax[..., :-1] += du[..., :-1] * x[..., 1:]
    return ax - b


def numpy_vjp(dl, d, du, b, x_bar):
    """float64 gradients of sum(x_bar * x) w.r.t. (dl, d, du, b), from the dense matrix.

    b_bar = A^-T x_bar and A_bar = -b_bar x^T (the whole n x n matrix); the operands' gradients
    are A_bar's three diagonals, zero at the ignored ends dl[..., 0] and du[..., -1].
    """
    a = dense_matrix(dl, d, du)
    x = np.linalg.solve(a, np.asarray(b, np.float64)[..., None])[..., 0]
    b_bar = np.linalg.solve(np.swapaxes(a, -1, -2), np.asarray(x_bar, np.float64)[..., None])
    a_bar = -b_bar * x[..., None, :]
    n = x.shape[-1]
    i = np.arange(n)
    dl_bar, du_bar = np.zeros_like(x), np.zeros_like(x)
    dl_bar[..., 1:] = a_bar[..., i[1:], i[:-1]]
    du_bar[..., :-1] = a_bar[..., i[:-1], i[1:]]
    return dl_bar, a_bar[..., i, i], du_bar, b_bar[..., 0]


def random_system(rng, shape, dtype, *, margin=1.0):
    """(dl, d, du, b) of `shape` (..., n): random, strictly diagonally dominant by `margin`
    (|d| >= |dl| + |du| + margin, either sign), so well conditioned and safe without pivoting:
    the infinity norm of A^-1 is at most 1 / margin.

    The ignored ends dl[..., 0] and du[..., -1] hold large random values, not zeros, so a
    solver that reads them gets caught.
    """
    dl, du, b = (rng.standard_normal(shape) for _ in range(3))
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    # Dominance is counted over the entries that are used.
    used_dl, used_du = dl.copy(), du.copy()
    used_dl[..., 0], used_du[..., -1] = 0, 0
    d = sign * (np.abs(used_dl) + np.abs(used_du) + margin + rng.random(shape))
    dl[..., 0], du[..., -1] = 1e3 * rng.standard_normal((2, *shape[:-1]))
    return tuple(jnp.asarray(a, dtype) for a in (dl, d, du, b))
