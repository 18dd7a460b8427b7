"""Oracles for wave2d.simulate, written without shard_map, ppermute or a mesh.

1. `simulate_reference`: the same leapfrog scheme in plain JAX on one array (`jnp.pad` supplies
   the zero boundary), time steps in `lax.scan`. What one writes for a single device; under
   `jax.jit` with shardings it is also the auto-partitioned baseline of bench.py.
2. `simulate_numpy`: float64 NumPy, step by step, independent of JAX.
3. `standing_wave`: a closed form. sin(p pi (i + 1) / (n + 1)) sin(q pi (j + 1) / (m + 1)) is
   an eigenvector of the 5-point Laplacian with zero boundary values, with eigenvalue -mu,
   mu = 4 (sin^2(p pi / (2 (n + 1))) + sin^2(q pi / (2 (m + 1)))). With a constant c2 each
   leapfrog step is u_next = (2 - c2 mu) u - u_prev, so a mode started at rest
   (`wave2d.start_at_rest`: u_prev = cos(theta) u0) is exactly cos(k theta) u0 at step k,
   where cos(theta) = 1 - c2 mu / 2. No simulation involved.
"""

import jax.numpy as jnp
import numpy as np
from jax import lax
from shared.worst import Worst

__all__ = ["WORST", "assert_close", "simulate_numpy", "simulate_reference", "standing_wave"]

# The largest error / bound seen by assert_close in this process, and the test that saw it
# (conftest.py prints it after the run).
WORST = Worst("wave2d")


def laplacian_reference(u):
    padded = jnp.pad(u, 1)  # the zero boundary
    return padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * u


def simulate_reference(u_prev, u, c2, steps):
    def step(state, _):
        u_prev, u = state
        return (u, 2 * u - u_prev + c2 * laplacian_reference(u)), None

    return lax.scan(step, (u_prev, u), None, length=steps)[0]


def simulate_numpy(u_prev, u, c2, steps):
    u_prev, u, c2 = (np.asarray(a, np.float64) for a in (u_prev, u, c2))
    for _ in range(steps):
        padded = np.pad(u, 1)
        lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * u
        u_prev, u = u, 2 * u - u_prev + c2 * lap
    return u_prev, u


def standing_wave(n, m, p, q, c2, steps):
    """(mode shape u0 (n, m) float64, u at step `steps` of the mode started at rest)."""
    i, j = np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :]
    u0 = np.sin(p * np.pi * i / (n + 1)) * np.sin(q * np.pi * j / (m + 1))
    mu = 4 * (np.sin(p * np.pi / (2 * (n + 1))) ** 2 + np.sin(q * np.pi / (2 * (m + 1))) ** 2)
    theta = np.arccos(1 - c2 * mu / 2)
    return u0, np.cos(steps * theta) * u0


def assert_close(got, want, *, scale, steps):
    """Each field within steps * eps * scale of the oracle: rounding grows at most linearly
    with the steps of this stable scheme, while a wrong halo is off by O(scale) within a few
    steps. eps is that of got's dtype."""
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g)
        bound = steps * np.finfo(g.dtype).eps * scale
        error = float(np.max(np.abs(g.astype(np.float64) - np.asarray(w, np.float64))))
        WORST.record(error / bound)
        assert error <= bound, f"error {error:.3e} > bound {bound:.3e}"
