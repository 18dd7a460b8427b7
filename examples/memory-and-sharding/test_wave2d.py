"""wave2d.simulate on 8 simulated CPU devices: values against the single-device plain-JAX
reference, float64 NumPy and a closed-form standing wave; the compiled program's collectives
(exactly the halo exchange: four collective-permutes of one row or column per step, between
neighbours only); donation; XLA's own partitioning of the same step (a pin); bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from reference import assert_close, simulate_numpy, simulate_reference, standing_wave
from shared.hlo import collectives
from wave2d import SPEC, _simulate, courant_squared, place, simulate, start_at_rest
from wave2d import make_mesh as make_mesh_of

# (px, py): 8 devices split every way, and one device.
MESH_SHAPES = [(8, 1), (1, 8), (4, 2), (2, 4), (1, 1)]
N, M = 64, 96  # 8, 16, 32 or 64 rows and 12, 24, 48 or 96 columns per block
STEPS = 150  # the pulse crosses blocks and reflects off the boundary


def make_mesh(shape, axis_types=None):
    """A mesh of the simulated CPU devices (conftest.py), also on a host whose default backend
    is an accelerator: jax.devices() is that accelerator's, often fewer than 8."""
    devices = jax.devices("cpu")[: int(np.prod(shape))]
    if axis_types is None:
        return make_mesh_of(shape, devices)
    return jax.make_mesh(shape, ("x", "y"), axis_types=axis_types, devices=devices)


def layered_medium(n=N, m=M):
    """c2 for a two-layer medium with a slanted interface (wave speed 1 above, 1.6 below), at
    95% of the largest stable time step."""
    h = 1.0 / (n + 1)
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    speed = np.where(rows + 0.3 * cols < 0.6 * n, 1.0, 1.6)
    return courant_squared(speed, 0.95 * h * np.sqrt(0.5) / speed.max(), h)


def pulse(rng, n=N, m=M):
    """A Gaussian pulse at a random spot, started at rest."""
    ci, cj = rng.uniform(0.2, 0.8) * n, rng.uniform(0.2, 0.8) * m
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    return np.exp(-((rows - ci) ** 2 + (cols - cj) ** 2) / 8.0)


def initial_state(rng, dtype):
    c2 = layered_medium().astype(dtype)
    u_prev, u = start_at_rest(pulse(rng).astype(dtype), c2)
    return np.asarray(u_prev), np.asarray(u), c2


# --- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_matches_single_device_reference_and_float64_numpy(rng, mesh_shape, dtype):
    u_prev, u, c2 = initial_state(rng, dtype)
    reference = jax.jit(simulate_reference, static_argnums=3)(u_prev, u, c2, STEPS)
    want = simulate_numpy(u_prev, u, c2, STEPS)
    got = simulate(u_prev, u, c2, STEPS, make_mesh(mesh_shape))
    for field in got:
        assert field.dtype == dtype
        assert field.sharding.is_equivalent_to(NamedSharding(make_mesh(mesh_shape), SPEC), 2)
    assert_close(got, reference, scale=1.0, steps=STEPS)
    assert_close(reference, want, scale=1.0, steps=STEPS)
    assert_close(got, want, scale=1.0, steps=STEPS)
    assert np.max(np.abs(want[1])) > 0.05  # the field is not near zero: the check means something


def test_standing_wave_closed_form():
    """A Laplacian eigenmode started at rest is cos(k theta) times its shape at step k."""
    c2 = 0.3
    u0, want = standing_wave(N, M, 3, 2, c2, STEPS)
    u_prev, u = start_at_rest(u0, np.full((N, M), c2))
    got = simulate(u_prev, u, np.full((N, M), c2), STEPS, make_mesh((2, 4)))
    # 4x: the oscillation's phase error accumulates on top of the rounding of the values.
    assert_close(got[1:], [want], scale=4.0, steps=STEPS)
    assert np.max(np.abs(want)) > 0.5  # cos(k theta) is not near zero at this step


def test_auto_axes_mesh_gives_the_same_result(rng):
    u_prev, u, c2 = initial_state(rng, np.float32)
    explicit = simulate(u_prev, u, c2, 20, make_mesh((2, 4)))
    auto = make_mesh((2, 4), axis_types=(AxisType.Auto,) * 2)
    np.testing.assert_array_equal(simulate(u_prev, u, c2, 20, auto)[1], explicit[1])


def test_zero_steps_returns_the_state(rng):
    u_prev, u, c2 = initial_state(rng, np.float32)
    got = simulate(u_prev, u, c2, 0, make_mesh((2, 4)))
    np.testing.assert_array_equal(got[0], u_prev)
    np.testing.assert_array_equal(got[1], u)


def test_one_point_per_block():
    """Blocks of a single row and column: every neighbour value is a halo."""
    rng = np.random.default_rng(0)
    u_prev, u = rng.standard_normal((2, 2, 4)).astype(np.float32)
    c2 = np.full((2, 4), 0.2, np.float32)
    got = simulate(u_prev, u, c2, 5, make_mesh((2, 4)))
    assert_close(got, simulate_numpy(u_prev, u, c2, 5), scale=10.0, steps=5)


def test_gradient_with_respect_to_the_medium(rng):
    """d/d c2 of sum(u^2) after 10 steps (what full-waveform inversion needs): ppermute's
    transpose is the reverse permutation. Against plain autodiff of the reference, and the
    reference against central differences of the float64 NumPy simulation."""
    u_prev, u, c2 = initial_state(rng, np.float64)
    mesh = make_mesh((2, 4))

    def loss(simulate_fn):
        return lambda c2: jnp.sum(simulate_fn(u_prev, u, c2)[1] ** 2)

    with jax.set_mesh(mesh):  # a traced c2 needs the mesh in context (Explicit axes)
        got = jax.grad(loss(lambda *f: simulate(*f, 10, mesh)))(jnp.asarray(c2))
    want = jax.grad(loss(lambda *f: simulate_reference(*f, 10)))(jnp.asarray(c2))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
    direction = rng.standard_normal(c2.shape)
    step = 1e-5
    plus, minus = (
        np.sum(simulate_numpy(u_prev, u, c2 + sign * step * direction, 10)[1] ** 2)
        for sign in (1, -1)
    )
    finite_difference = (plus - minus) / (2 * step)
    assert np.sum(want * direction) == pytest.approx(finite_difference, rel=1e-7)


# --- the compiled program ----------------------------------------------------------------------


def compiled(mesh, steps=10, dtype=np.float32):
    fields = (place(np.zeros((N, M), dtype), mesh) for _ in range(3))
    return _simulate.lower(*fields, steps=steps, mesh=mesh).compile()


def expected_halo_exchange(px, py):
    """{(shape, source -> target pairs)} for the four ppermutes, partition ids in mesh order."""
    rows, cols = N // px, M // py
    ids = np.arange(px * py).reshape(px, py)
    expected = set()
    if px > 1:  # one row of `cols` numbers to the block below, one to the block above
        down = frozenset(zip(ids[:-1].ravel().tolist(), ids[1:].ravel().tolist(), strict=True))
        expected |= {(f"f32[1,{cols}]", down), (f"f32[1,{cols}]", frozenset(map(reversed_, down)))}
    if py > 1:  # one column of `rows` numbers to the right, one to the left
        right = frozenset(
            zip(ids[:, :-1].ravel().tolist(), ids[:, 1:].ravel().tolist(), strict=True)
        )
        expected |= {
            (f"f32[{rows},1]", right),
            (f"f32[{rows},1]", frozenset(map(reversed_, right))),
        }
    return expected


def reversed_(pair):
    return pair[::-1]


@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_only_collectives_are_the_halo_exchange_once_per_step(mesh_shape):
    px, py = mesh_shape
    found = collectives(compiled(make_mesh(mesh_shape)).as_text())
    assert [c.op for c in found] == ["collective-permute"] * (2 * (px > 1) + 2 * (py > 1))
    assert {(c.shape, c.pairs) for c in found} == expected_halo_exchange(px, py)
    assert all(c.in_loop for c in found)  # in the time loop's body: once per step


def test_state_is_donated_and_its_buffers_reused(rng):
    mesh = make_mesh((2, 4))
    u_prev, u, c2 = (place(f, mesh) for f in initial_state(rng, np.float32))
    block_bytes = u.addressable_shards[0].data.nbytes
    stats = _simulate.lower(u_prev, u, c2, steps=10, mesh=mesh).compile().memory_analysis()
    assert stats.alias_size_in_bytes == 2 * block_bytes  # per device: u_prev and u, not c2

    def pointers(*arrays):
        return {s.data.unsafe_buffer_pointer() for a in arrays for s in a.addressable_shards}

    before = pointers(u_prev, u)
    out = simulate(u_prev, u, c2, 10, mesh)
    assert u_prev.is_deleted()
    assert u.is_deleted()
    assert not c2.is_deleted()
    assert pointers(*out) == before
    with pytest.raises(RuntimeError, match="deleted"):
        jnp.sum(u)


def test_pin_xla_partitions_the_plain_step_with_more_communication(rng):
    """The reference under jit with the same shardings (XLA's own partitioning) is correct but,
    on JAX 0.12, exchanges more: eight collective-permutes per step, some of them two or three
    rows or columns wide, where the shard_map version has four of one. If this fails because
    XLA now does as well, the README's comparison needs updating, not the code."""
    mesh = make_mesh((2, 4), axis_types=(AxisType.Auto,) * 2)
    sharding = NamedSharding(mesh, SPEC)
    auto = jax.jit(
        simulate_reference,
        static_argnums=3,
        in_shardings=(sharding,) * 3,
        out_shardings=(sharding,) * 2,
    )
    u_prev, u, c2 = initial_state(rng, np.float32)
    assert_close(
        auto(u_prev, u, c2, STEPS), simulate_numpy(u_prev, u, c2, STEPS), scale=1.0, steps=STEPS
    )
    found_auto = collectives(auto.lower(u_prev, u, c2, 10).compile().as_text())
    found_ours = collectives(compiled(mesh).as_text())
    assert {c.op for c in found_auto} == {"collective-permute"}
    assert len(found_auto) > len(found_ours)
    assert sum(c.bytes for c in found_auto) > sum(c.bytes for c in found_ours)


# --- bad input ---------------------------------------------------------------------------------


def test_courant_squared_refuses_an_unstable_step():
    speed = np.ones((8, 8))
    assert courant_squared(speed, 0.5, 1.0).max() == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"unstable time step: .* use dt <= 0.707"):
        courant_squared(speed, 0.8, 1.0)
    with pytest.raises(ValueError, match="non-negative wave speeds"):
        courant_squared(-speed, 0.1, 1.0)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((np.ones(8), np.ones(8), np.ones(8), 1), ValueError, r"u_prev must be a 2-D field"),
        ((np.ones((8, 8)), np.ones((8, 4)), np.ones((8, 8)), 1), ValueError, "one shape"),
        ((np.ones((8, 8), np.int32),) * 3 + (1,), TypeError, "floating-point, got int32"),
        (
            (np.ones((8, 8), np.float32), np.ones((8, 8)), np.ones((8, 8), np.float32), 1),
            TypeError,
            "one dtype",
        ),
        ((np.ones((8, 8)),) * 3 + (-1,), ValueError, "non-negative int, got -1"),
        ((np.ones((8, 8)),) * 3 + (2.0,), ValueError, "non-negative int, got 2.0"),
        ((np.ones((6, 8)),) * 3 + (1,), ValueError, r"\(6, 8\) grid does not split into equal"),
        ((np.ones((0, 8)),) * 3 + (1,), ValueError, r"\(0, 8\) grid does not split into equal"),
    ],
)
def test_bad_input_raises_clear_error(args, error, message):
    with pytest.raises(error, match=message):
        simulate(*args, make_mesh((4, 2)))


# --- the host ----------------------------------------------------------------------------------


def test_meshes_and_reference_use_the_cpu_devices_on_a_one_accelerator_host(monkeypatch):
    """On a host with one accelerator (a TPU v5e chip, say) jax.devices() has one device: the
    meshes must still be the 8 simulated CPU devices, and the single-device reference runs on
    the CPU device (conftest.py), not on the accelerator's emulated float64."""
    cpu = jax.devices("cpu")
    real_devices = jax.devices

    def one_accelerator(backend=None):
        return real_devices(backend) if backend is not None else real_devices("cpu")[:1]

    monkeypatch.setattr(jax, "devices", one_accelerator)
    for axis_types in (None, (AxisType.Auto,) * 2):
        assert list(make_mesh((2, 4), axis_types).devices.flat) == cpu[:8]
    assert jnp.zeros((), jnp.float64).devices() == {cpu[0]}
