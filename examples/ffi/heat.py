"""The use case: implicit time stepping of the 1-D heat equation, one tridiagonal solve a step.

    u_t = kappa u_xx  on 0 < x < 1,  u(0) = u(1) = 0,  n interior points x_i = i h, h = 1/(n+1)

Crank-Nicolson with r = kappa dt / h^2 and L = tridiag(1, -2, 1):

    (I - r/2 L) u_next = (I + r/2 L) u

It is unconditionally stable (an explicit step needs r <= 1/2, i.e. dt ~ h^2), at the price of a
tridiagonal solve per step: d = 1 + r, dl = du = -r/2, diagonally dominant for every r > 0, so
the Thomas algorithm needs no pivoting. The solver is a parameter, so the FFI solver and the
plain-JAX oracles run the same simulation.

Every leading axis of u0 and kappa is a batch of independent rods; kappa may differ per rod and
is differentiable (it enters the matrix, so its gradient needs the gradient of the solve with
respect to the diagonals, not just the right-hand side).
"""

import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["crank_nicolson", "grid", "sine_mode_exact"]


def grid(n, dtype=np.float64):
    """The n interior points and the spacing h."""
    h = 1.0 / (n + 1)
    return jnp.arange(1, n + 1, dtype=dtype) * h, h


def crank_nicolson(solve, u0, kappa, dt, steps):
    """u after `steps` Crank-Nicolson steps of size dt. u0: (..., n); kappa: broadcastable to
    u0.shape[:-1] (one diffusivity per rod); solve: any tridiagonal_solve(dl, d, du, b)."""
    n = u0.shape[-1]
    h = 1.0 / (n + 1)
    r = jnp.asarray(kappa, u0.dtype)[..., None] * (dt / h**2) * jnp.ones_like(u0)
    dl = du = -0.5 * r
    d = 1.0 + r

    def step(u, _):
        # (I + r/2 L) u, with the zero boundary values outside the rod.
        zero = jnp.zeros_like(u[..., :1])
        left = jnp.concatenate([zero, u[..., :-1]], axis=-1)
        right = jnp.concatenate([u[..., 1:], zero], axis=-1)
        rhs = (1.0 - r) * u + 0.5 * r * (left + right)
        return solve(dl, d, du, rhs), None

    u, _ = lax.scan(step, u0, None, length=steps)
    return u


def sine_mode_exact(n, kappa, dt, steps):
    """Closed form of crank_nicolson for u0 = sin(pi x), float64 NumPy: sin(pi x) is an
    eigenvector of L with eigenvalue -4 s, s = sin(pi h / 2)^2, so every step multiplies it by
    g = (1 - 2 r s) / (1 + 2 r s). Returns (u, du/dkappa)."""
    h = 1.0 / (n + 1)
    x = np.arange(1, n + 1) * h
    s = np.sin(np.pi * h / 2) ** 2
    r = kappa * dt / h**2
    g = (1 - 2 * r * s) / (1 + 2 * r * s)
    dg_dkappa = -4 * s / (1 + 2 * r * s) ** 2 * dt / h**2
    mode = np.sin(np.pi * x)
    return g**steps * mode, steps * g ** (steps - 1) * dg_dkappa * mode
