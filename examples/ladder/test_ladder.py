"""Every rung against the same float64 oracle, under each transformation, and what it refuses.

SUPPORTS is the table of what each rung supports: an entry is either OK (the transformation
runs and matches oracle.py) or (exception type, message) that the transformation raises. The
tests check every entry, so the table in README.md is tested, not claimed.
"""

import functools
import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
from conftest import FFI_MISSING
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads
from shared import devices
from shared.hlo import collectives

OK = "ok"
LOCAL = "local"  # sharded rows stay sharded: no collective in the forward pass
GATHERS = "gathers"  # right values, but the forward pass all-gathers x onto every device
NO_JVP = (TypeError, "can't apply forward-mode autodiff (jvp) to a custom_vjp function")
BROADCAST = (ValueError, "Incompatible shapes for broadcasting")

# rung: module, then one entry per transformation (jit and grad: every rung). grad2: grad of
# grad; jvp: forward mode; sharding: rows sharded on 8 devices (shared/devices.py: the simulated CPU
# devices where the default platform has fewer); bad_w: w of the wrong shape.
SUPPORTS = {
    "reference": {"grad2": OK, "vmap": OK, "jvp": OK, "sharding": LOCAL, "bad_w": BROADCAST},
    "custom_vjp_rung": {
        "grad2": OK,  # the backward is plain JAX, which JAX differentiates again
        "vmap": OK,
        "jvp": NO_JVP,
        "sharding": LOCAL,
        "bad_w": BROADCAST,
    },
    "exported": {
        "grad2": (ValueError, "No VJP is available"),  # serialize(vjp_order=1)
        "vmap": (NotImplementedError, "Batching rule for 'call_exported' not implemented"),
        "jvp": NO_JVP,
        "sharding": LOCAL,
        "bad_w": (ValueError, "Shape mismatch for args[1].shape[0]"),
    },
    "partitioned": {
        "grad2": (NotImplementedError, "Differentiation rule for 'custom_partitioning'"),
        "vmap": (NotImplementedError, "Batching rule for 'custom_partitioning' not implemented"),
        "jvp": NO_JVP,
        "sharding": LOCAL,
        "bad_w": BROADCAST,
    },
    "pallas_kernel": {
        "grad2": (ValueError, "Linearization failed to produce known values"),  # pallas_call
        "vmap": OK,
        "jvp": NO_JVP,
        "sharding": GATHERS,
        "bad_w": (ValueError, "need x (rows, d) and w (d,)"),
    },
    "ffi_handler": {
        "grad2": (ValueError, "cannot be differentiated"),
        "vmap": OK,
        "jvp": NO_JVP,
        "sharding": GATHERS,
        "bad_w": (ValueError, "need x (..., d) and w (d,)"),
    },
    "primitive": {
        "grad2": OK,
        "vmap": OK,
        "jvp": OK,
        "sharding": LOCAL,
        "bad_w": (TypeError, "w must have shape (64,)"),
    },
}


def rung_params():
    for name in SUPPORTS:
        marks = []
        if name == "ffi_handler" and FFI_MISSING:
            marks = [pytest.mark.skip(reason=f"FFI rung not built: {FFI_MISSING}")]
        yield pytest.param(name, id=name, marks=marks)


@pytest.fixture(params=list(rung_params()))
def rung(request):
    fn = importlib.import_module(request.param).rms_norm
    if request.param == "pallas_kernel":
        # Blocks of 8 rows: several grid steps at the tests' sizes, and a ragged last one at 4100.
        fn = functools.partial(fn, block_rows=8)
    if request.param == "ffi_handler":
        # Its handlers are CPU-only: where the default device is a GPU, its tests run (and
        # jit) on the CPU; test_the_ffi_rung_refuses_clearly_... checks the other platforms.
        with jax.default_device("cpu"):
            yield request.param, fn
        return
    yield request.param, fn


def case(rng, rows=32, d=64):
    """x with rows of very different scales, w around 1, and a cotangent dy."""
    scale = np.exp(rng.uniform(-3, 3, size=(rows, 1)))
    x = jnp.asarray(scale * rng.standard_normal((rows, d)), jnp.float32)
    w = jnp.asarray(1 + 0.5 * rng.standard_normal(d), jnp.float32)
    dy = jnp.asarray(rng.standard_normal((rows, d)), jnp.float32)
    return x, w, dy


def grads(fn, x, w, dy):
    return jax.jit(jax.grad(lambda x, w: jnp.sum(fn(x, w) * dy), argnums=(0, 1)))(x, w)


def assert_matches_oracle(fn, x, w, dy, *, gradients=True):
    oracle.assert_close(jax.jit(fn)(x, w), oracle.rms_norm(x, w))
    if gradients:
        for got, want in zip(grads(fn, x, w, dy), oracle.rms_norm_vjp(x, w, dy), strict=True):
            oracle.assert_close(got, want)


def test_the_reference_matches_the_float64_oracle(rng):
    """The plain-JAX reference itself, before anything is compared with it."""
    import reference

    x, w, dy = case(rng)
    assert_matches_oracle(reference.rms_norm, x, w, dy)
    # Eagerly too: a bug that only the compiler has would show as a difference.
    oracle.assert_close(reference.rms_norm(x, w), oracle.rms_norm(x, w))


def test_oracle_vjp_matches_float64_finite_differences(rng):
    """The hand-written VJP of the oracle against central differences of its forward."""
    x, w, dy = (np.asarray(v, np.float64) for v in case(rng, rows=4, d=8))
    dx, dw = oracle.rms_norm_vjp(x, w, dy)
    h = 1e-6
    for value, grad in ((x, dx), (w, dw)):
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            bump = np.zeros_like(value)
            bump[i] = h
            args = (x + bump, w) if value is x else (x, w + bump)
            minus = (x - bump, w) if value is x else (x, w - bump)
            numeric[i] = np.sum((oracle.rms_norm(*args) - oracle.rms_norm(*minus)) * dy) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8 * np.abs(numeric).max())


def test_jit_and_grad(rung, rng):
    _, fn = rung
    assert_matches_oracle(fn, *case(rng))


def test_check_grads_and_second_order(rung, rng):
    """check_grads (numerical differences) to the highest order the rung supports."""
    name, fn = rung
    x, w, _ = case(rng, rows=8, d=8)
    refusal = expect(SUPPORTS[name]["grad2"])
    check_grads(fn, (x, w), order=1 if refusal else 2, modes=["rev"], atol=2e-2, rtol=2e-2)
    if refusal:
        loss = lambda x: jnp.sum(jnp.sin(fn(x, w)))  # noqa: E731
        with refusal:
            jax.grad(lambda x: jnp.sum(jnp.cos(jax.grad(loss)(x))))(x)


def test_jit_grad_at_4100_rows(rung, rng):
    """Past the 4096 rows where XLA:CPU miscompiles jit(grad) of the rsqrt formulation."""
    _, fn = rung
    assert_matches_oracle(fn, *case(rng, rows=4100, d=32))


def expect(entry):
    """A context that expects the table's refusal, or nothing for OK."""
    if entry in (OK, LOCAL, GATHERS):
        return None
    exc_type, message = entry
    return pytest.raises(exc_type, match=re.escape(message))


def test_vmap(rung, rng):
    name, fn = rung
    x, w, dy = case(rng, rows=24)
    xs, dys = x.reshape(3, 8, -1), dy.reshape(3, 8, -1)
    batched = jax.vmap(fn, in_axes=(0, None))
    refusal = expect(SUPPORTS[name]["vmap"])
    if refusal:
        with refusal:
            batched(xs, w)
        return
    oracle.assert_close(jax.jit(batched)(xs, w), oracle.rms_norm(xs, w))
    got = jax.grad(lambda xs, w: jnp.sum(batched(xs, w) * dys), argnums=(0, 1))(xs, w)
    for g, want in zip(got, oracle.rms_norm_vjp(xs, w, dys), strict=True):
        oracle.assert_close(g, want)
    # A weight per batch element too.
    ws = jnp.stack([w, 2 * w, -w])
    got = jax.jit(jax.vmap(fn))(xs, ws)
    for b in range(3):
        oracle.assert_close(got[b], oracle.rms_norm(xs[b], ws[b]))


def test_forward_mode(rung, rng):
    name, fn = rung
    x, w, _ = case(rng, rows=4, d=8)
    tx, tw, _ = case(rng, rows=4, d=8)
    refusal = expect(SUPPORTS[name]["jvp"])
    if refusal:
        with refusal:
            jax.jvp(fn, (x, w), (tx, tw))
        return
    _, tangent = jax.jit(lambda p, t: jax.jvp(fn, p, t))((x, w), (tx, tw))
    h = 1e-6  # the oracle's directional derivative, by float64 central differences
    x64, w64, tx64, tw64 = (np.asarray(v, np.float64) for v in (x, w, tx, tw))
    plus = oracle.rms_norm(x64 + h * tx64, w64 + h * tw64)
    minus = oracle.rms_norm(x64 - h * tx64, w64 - h * tw64)
    oracle.assert_close(tangent, (plus - minus) / (2 * h))


def test_sharded_rows(rung, rng):
    """8 devices, rows sharded: right values and gradients, and the collectives pinned."""
    name, fn = rung
    x, w, dy = case(rng)
    mesh = jax.make_mesh(
        (8,), ("rows",), axis_types=(AxisType.Auto,), devices=devices.mesh_devices(8)
    )
    with jax.set_mesh(mesh):
        x = jax.device_put(x, NamedSharding(mesh, P("rows", None)))
        dy = jax.device_put(dy, NamedSharding(mesh, P("rows", None)))
        assert_matches_oracle(fn, x, w, dy)
        forward = jax.jit(fn).lower(x, w).compile().as_text()
    gathers = [c for c in collectives(forward) if c.op == "all-gather"]
    if SUPPORTS[name]["sharding"] == LOCAL:
        assert collectives(forward) == []
    else:
        assert gathers, "expected the partitioner to gather the custom call's operands"


def test_bad_weight_is_refused(rung, rng):
    name, fn = rung
    x, w, _ = case(rng)
    with expect(SUPPORTS[name]["bad_w"]):
        fn(x, w[:-1])


def test_one_exported_artifact_serves_every_batch_size_to_first_order(rng):
    import exported

    blob = exported.export_bytes(64)
    assert isinstance(blob, bytes | bytearray)
    (x_aval, w_aval) = jax.export.deserialize(blob).in_avals
    assert str(x_aval.shape[0]) == "b"
    assert w_aval.shape == (64,)
    exported.load.cache_clear()
    for rows in (8, 24):  # one artifact (load is cached per d) for both batch sizes
        x, w, dy = case(rng, rows=rows)
        assert_matches_oracle(exported.rms_norm, x, w, dy)
    assert exported.load.cache_info().currsize == 1
    # serialize(vjp_order=1): a second derivative is not in the artifact.
    x, w, _ = case(rng, rows=8)
    loss = lambda x: jnp.sum(exported.rms_norm(x, w) ** 2)  # noqa: E731
    with pytest.raises(ValueError, match="No VJP is available"):
        jax.grad(lambda x: jnp.sum(jax.grad(loss)(x)))(x)


@pytest.mark.skipif(bool(FFI_MISSING), reason=f"FFI rung not built: {FFI_MISSING}")
def test_the_ffi_handler_checks_shapes_itself(rng):
    """XLA checks only the element type: past the Python wrapper, the C++ must refuse."""
    import ffi_handler

    with jax.default_device("cpu"):  # the handler's one platform
        x, w, _ = case(rng)
        with pytest.raises(jax.errors.JaxRuntimeError, match=re.escape("w must have shape (d,)")):
            jax.block_until_ready(ffi_handler._forward(x, w[:-1]))


# --- platforms: what runs where, on a machine whose default backend is not the CPU -----------


def test_a_mesh_larger_than_the_default_platform_takes_the_simulated_cpu_devices(monkeypatch):
    """One GPU and 8 simulated CPU devices: the 8-device mesh is the CPU devices'."""
    cpus = jax.devices("cpu")
    one_gpu = [type("Device", (), {"platform": "gpu"})()]
    monkeypatch.setattr(jax, "devices", lambda backend=None: cpus if backend == "cpu" else one_gpu)
    monkeypatch.setattr(devices, "SIMULATED_MESHES", {})
    assert devices.mesh_devices(8) == cpus[:8]
    assert devices.SIMULATED_MESHES == {"gpu": 1}
    assert devices.mesh_devices(1) == one_gpu


def test_the_pallas_rung_is_interpreted_wherever_it_is_lowered_for_the_cpu(monkeypatch, rng):
    """The kernel is interpreted on the CPU whatever the default backend (a GPU runner
    shards on simulated CPU devices): the choice is made per lowering platform."""
    import pallas_kernel

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # a no-op on a GPU runner
    on_cpu = jax.devices("cpu")[0]
    x, w, dy = (jax.device_put(a, on_cpu) for a in case(rng, rows=24))  # three blocks of 8 rows
    fn = functools.partial(pallas_kernel.rms_norm, block_rows=8)
    assert_matches_oracle(fn, x, w, dy)


def test_the_exported_artifact_serves_the_cpu_too(monkeypatch, rng):
    """Exported for the default platform and the CPU, where a one-GPU runner's sharding
    tests run (simulated devices)."""
    import exported

    monkeypatch.setattr(jax.export, "default_export_platform", lambda: "cuda")
    artifact = jax.export.deserialize(exported.export_bytes(8))
    assert artifact.platforms == ("cuda", "cpu")
    # On the CPU device explicitly: the default device may be a TPU's, not exported for.
    on_cpu = jax.devices("cpu")[0]
    x, w = (jax.device_put(a, on_cpu) for a in case(rng, rows=4, d=8)[:2])
    oracle.assert_close(artifact.call(x, w), oracle.rms_norm(x, w))


@pytest.mark.skipif(bool(FFI_MISSING), reason=f"FFI rung not built: {FFI_MISSING}")
@pytest.mark.parametrize("platforms", [("cuda",), ("tpu",), ("cpu", "cuda")], ids=str)
def test_the_ffi_rung_refuses_clearly_to_lower_where_its_handler_is_missing(platforms, rng):
    """Its handlers are CPU-only: lowered for another platform, one clear refusal, not XLA's
    "No FFI handler registered" at compile time."""
    import ffi_handler

    x, w, dy = case(rng, rows=8, d=8)
    forward = jax.jit(ffi_handler.rms_norm).trace(x, w)
    with pytest.raises(NotImplementedError, match="the FFI rung's handlers are CPU-only"):
        forward.lower(lowering_platforms=platforms)
    backward = jax.jit(jax.vjp(ffi_handler.rms_norm, x, w)[1]).trace(dy)
    with pytest.raises(NotImplementedError, match="the FFI rung's handlers are CPU-only"):
        backward.lower(lowering_platforms=platforms)


@pytest.mark.skipif(bool(FFI_MISSING), reason=f"FFI rung not built: {FFI_MISSING}")
def test_the_ffi_rung_runs_uncommitted_operands_on_the_cpu(rng):
    import ffi_handler

    x, w, _ = case(rng, rows=8, d=8)
    cpu = jax.devices("cpu")[0]
    y = ffi_handler.rms_norm(np.asarray(x), np.asarray(w))
    assert y.devices() == {cpu}
    oracle.assert_close(y, oracle.rms_norm(x, w))
