"""The 2-D acoustic wave equation, domain-decomposed over a device mesh with explicit halo
exchange: `jax.shard_map` + `lax.ppermute`, time steps in `lax.scan`, state donated.

    u_tt = c(x, y)^2 (u_xx + u_yy)   on a rectangle, u = 0 on its boundary

Leapfrog in time, the 5-point Laplacian in space (grid spacing h, time step dt):

    u_next = 2 u - u_prev + c2 * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1] - 4 u[i, j])

with c2 = (c dt / h)^2 per cell, stable while c2 <= 1/2 everywhere. Arrays hold the interior
points only; the boundary values are the zeros around them.

The grid is split into blocks over a 2-D mesh with axes ("x", "y"): device (i, j) holds
rows i * (n / px) ... and columns j * (m / py) ... of every field. One step needs, from each
of the four neighbours, the one row or column of u next to the shared edge (its "halo"), so
each step is four `ppermute`s of one row or column each. A block on the edge of the grid has
no neighbour there: `ppermute` fills what no device sends with zeros, which is exactly the
boundary condition u = 0. An axis of size 1 needs no exchange at all, and gets none.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["AXES", "SPEC", "courant_squared", "make_mesh", "place", "simulate", "start_at_rest"]

AXES = ("x", "y")
SPEC = P(*AXES)  # rows over "x", columns over "y": every field is laid out like this
MAX_C2 = 0.5  # leapfrog with the 5-point Laplacian is stable for c2 <= 1/2 in 2-D


def make_mesh(shape, devices=None):
    """A (px, py) mesh with axes ("x", "y"), px * py devices (the first ones by default)."""
    devices = jax.devices()[: int(np.prod(shape))] if devices is None else devices
    return jax.make_mesh(tuple(shape), AXES, devices=devices)


def place(field, mesh):
    """Lay a field out in blocks over the mesh (no copy if it already is)."""
    return jax.device_put(field, NamedSharding(mesh, SPEC))


def courant_squared(speed, dt, h):
    """c2 = (speed * dt / h)^2 per cell, float32; refuses an unstable step (max c2 > 1/2)."""
    speed = np.asarray(speed, np.float64)
    if speed.ndim != 2 or not np.all(np.isfinite(speed)) or np.any(speed < 0):
        raise ValueError("speed must be a 2-D array of finite, non-negative wave speeds")
    c2 = (speed * dt / h) ** 2
    if c2.max() > MAX_C2:
        largest = h * np.sqrt(MAX_C2) / speed.max()
        raise ValueError(
            f"unstable time step: (c dt / h)^2 reaches {c2.max():.3g} > {MAX_C2}; "
            f"use dt <= {largest:.3g}"
        )
    return c2.astype(np.float32)


def start_at_rest(u0, c2):
    """(u_prev, u) for a wave starting from the displacement u0 with zero velocity: u_prev is
    chosen so that the first leapfrog step is the second-order accurate u0 + c2/2 lap(u0)."""
    padded = jnp.pad(u0, 1)
    lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * u0
    return u0 + 0.5 * c2 * lap, u0


# --- one block's step, with the halo exchange --------------------------------------------------


def _halo(block, axis_name, size, dim, from_before):
    """The row (dim 0) or column (dim 1) of the neighbouring block next to this block's edge:
    from the block before it along the mesh axis (its last row or column) if from_before,
    else from the block after it (its first). Zeros on the grid's edge: the boundary."""
    start = block.shape[dim] - 1 if from_before else 0
    edge = lax.slice_in_dim(block, start, start + 1, axis=dim)
    if size == 1:  # the whole axis is on this device: the only neighbour is the boundary
        return jnp.zeros_like(edge)
    # (source, destination) pairs over the axis index; nobody sends to the first (last) block.
    pairs = [(i, i + 1) for i in range(size - 1)]
    if not from_before:
        pairs = [(j, i) for i, j in pairs]
    return lax.ppermute(edge, axis_name, pairs)


def _laplacian_block(u, px, py):
    north = _halo(u, "x", px, 0, from_before=True)
    south = _halo(u, "x", px, 0, from_before=False)
    west = _halo(u, "y", py, 1, from_before=True)
    east = _halo(u, "y", py, 1, from_before=False)
    up = jnp.concatenate([north, u[:-1]], axis=0)
    down = jnp.concatenate([u[1:], south], axis=0)
    left = jnp.concatenate([west, u[:, :-1]], axis=1)
    right = jnp.concatenate([u[:, 1:], east], axis=1)
    return up + down + left + right - 4 * u


def _simulate_blocks(u_prev, u, c2, *, steps, px, py):
    """Per device: `steps` leapfrog steps of its own block, exchanging halos every step."""

    def step(state, _):
        u_prev, u = state
        return (u, 2 * u - u_prev + c2 * _laplacian_block(u, px, py)), None

    return lax.scan(step, (u_prev, u), None, length=steps)[0]


# Donated: u_prev and u. The two results have their shapes, dtypes and shardings, so XLA
# writes them into those buffers: chained calls (a long run in chunks) allocate no new state.
@partial(jax.jit, static_argnames=("steps", "mesh"), donate_argnums=(0, 1))
def _simulate(u_prev, u, c2, *, steps, mesh):
    blocks = partial(_simulate_blocks, steps=steps, px=mesh.shape["x"], py=mesh.shape["y"])
    return jax.shard_map(blocks, mesh=mesh, in_specs=(SPEC,) * 3, out_specs=(SPEC, SPEC))(
        u_prev, u, c2
    )


def simulate(u_prev, u, c2, steps, mesh):
    """Advance the wave `steps` time steps: (u_prev, u) -> (u at step steps - 1, at steps).

    u_prev, u, c2: (n, m) floating arrays of one dtype, n divisible by the mesh's "x" size and
    m by its "y" size. u_prev and u are DONATED: pass arrays laid out by `place(x, mesh)` and
    they are deleted, their buffers reused for the results (anything else is first copied
    into that layout, and the copy is donated). c2 is not checked for stability here (it may
    be a traced value): build it with `courant_squared`.
    """
    fields = {"u_prev": u_prev, "u": u, "c2": c2}
    for name, field in fields.items():
        if jnp.ndim(field) != 2:
            raise ValueError(f"{name} must be a 2-D field (n, m), got shape {jnp.shape(field)}")
        if not jnp.issubdtype(jnp.result_type(field), jnp.floating):
            raise TypeError(f"{name} must be floating-point, got {jnp.result_type(field)}")
    shapes = {name: jnp.shape(field) for name, field in fields.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"u_prev, u and c2 must have one shape, got {shapes}")
    dtypes = {name: str(jnp.result_type(field)) for name, field in fields.items()}
    if len(set(dtypes.values())) != 1:
        raise TypeError(f"u_prev, u and c2 must have one dtype, got {dtypes}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    n, m = jnp.shape(u)
    px, py = mesh.shape["x"], mesh.shape["y"]
    if n < px or m < py or n % px or m % py:
        raise ValueError(
            f"a ({n}, {m}) grid does not split into equal non-empty blocks over a ({px}, {py}) "
            f"mesh: n must be a positive multiple of {px} and m of {py}"
        )
    u_prev, u, c2 = (place(f, mesh) for f in (u_prev, u, c2))
    return _simulate(u_prev, u, c2, steps=int(steps), mesh=mesh)
