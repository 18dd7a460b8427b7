"""prefix_sum / suffix_sum on 8 simulated CPU devices: values and gradients against both oracles,
output shardings, the collectives in the compiled programs (the proof that the rule is used and
what XLA does without it), the uneven fallback, pins for what custom_partitioning cannot do,
and input validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads
from prefix_sum import prefix_sum, suffix_sum
from reference import (
    assert_within,
    error_bound,
    prefix_sum_f64,
    prefix_sum_reference,
    suffix_sum_f64,
    suffix_sum_reference,
)
from shared.hlo import collectives, compiled_text

# (row devices, sequence devices): 8 either way, both 2-D splits, and a single device.
MESH_SHAPES = [(8, 1), (1, 8), (4, 2), (2, 4), (1, 1)]
# replicated, rows sharded, sequence sharded, both.
SPECS = [P(), P("rows", None), P(None, "seq"), P("rows", "seq")]
SHAPE = (16, 512)  # 16 rows split 8 ways, 512 positions split 8 ways: 64 per block


def make_mesh(shape):
    # Auto axes: custom_partitioning does not run under Explicit axes, which jax.make_mesh
    # uses by default. The simulated CPU devices (conftest.py), also on a host whose default
    # backend is an accelerator: jax.devices() is that accelerator's, often fewer than 8.
    devices = jax.devices("cpu")[: shape[0] * shape[1]]
    return jax.make_mesh(shape, ("rows", "seq"), axis_types=(AxisType.Auto,) * 2, devices=devices)


def place(rng, mesh, spec, shape=SHAPE, dtype=np.float32):
    """A random array on the host, and the same array laid out on the mesh."""
    host = rng.standard_normal(shape).astype(dtype)
    return host, jax.device_put(host, NamedSharding(mesh, spec))


def sums_and_gradient(prefix, suffix):
    """(x, c) -> (prefix(x), suffix(c), gradient of sum(c * prefix(x)) w.r.t. x). The gradient
    is suffix(c) again: for prefix_sum computed by the custom VJP, for the reference by
    ordinary autodiff."""

    def fn(x, c):
        grad = jax.grad(lambda x: jnp.sum(prefix(x) * c))(x)
        return prefix(x), suffix(c), grad

    return fn


RULE = sums_and_gradient(prefix_sum, suffix_sum)
REFERENCE = sums_and_gradient(prefix_sum_reference, suffix_sum_reference)


def check_against_oracles(x, c, got, reference):
    """got and reference: the outputs of RULE and REFERENCE for the host arrays x and c."""
    for out, ref, want, bound in zip(
        got,
        reference,
        (prefix_sum_f64(x), suffix_sum_f64(c), suffix_sum_f64(c)),
        (error_bound(x, x.dtype), *[error_bound(c, c.dtype, reverse=True)] * 2),
        strict=True,
    ):
        assert out.dtype == x.dtype
        assert_within(out, want, bound)
        # The plain-JAX reference has its own rounding, hence twice the bound.
        assert_within(out, ref, 2 * bound)


# --- values and gradients ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_values_and_gradients_match_oracles(rng, mesh_shape, spec, dtype):
    mesh = make_mesh(mesh_shape)
    with jax.set_mesh(mesh):
        x_host, x = place(rng, mesh, spec, dtype=dtype)
        c_host, c = place(rng, mesh, spec, dtype=dtype)
        got, reference = jax.jit(RULE)(x, c), jax.jit(REFERENCE)(x, c)
    check_against_oracles(x_host, c_host, got, reference)


def test_multi_axis_sequence_sharding(rng):
    """The length axis split over both mesh axes, (rows, seq) = 8 blocks, major axis first."""
    mesh = make_mesh((2, 4))
    spec = P(None, ("rows", "seq"))
    with jax.set_mesh(mesh):
        x_host, x = place(rng, mesh, spec)
        c_host, c = place(rng, mesh, spec)
        got, reference = jax.jit(RULE)(x, c), jax.jit(REFERENCE)(x, c)
        found = collectives(compiled_text(prefix_sum, x))
    check_against_oracles(x_host, c_host, got, reference)
    assert got[0].sharding.is_equivalent_to(NamedSharding(mesh, spec), 2)
    assert [(c.op, c.bytes) for c in found] == [("all-gather", SHAPE[0] * 8 * 4)]


def test_long_sequence_float32(rng):
    """2^18 positions in 8 blocks, positive data (no cancellation to hide the rounding): the
    error stays within the length-dependent bound."""
    mesh = make_mesh((1, 8))
    with jax.set_mesh(mesh):
        x = rng.uniform(0.0, 1.0, (2, 1 << 18)).astype(np.float32)
        got = jax.jit(prefix_sum)(jax.device_put(x, NamedSharding(mesh, P(None, "seq"))))
    assert_within(got, prefix_sum_f64(x), error_bound(x, np.float32))


def test_bound_is_not_vacuous():
    """A sequential float32 cumsum of a million uniform numbers misses the bound: it is tight
    enough to tell summation orders apart, let alone a wrong carry."""
    x = np.random.default_rng(3).uniform(0.0, 1.0, (1, 1 << 20)).astype(np.float32)
    sequential = np.cumsum(x, axis=1, dtype=np.float32)
    with pytest.raises(AssertionError, match="exceeds the bound"):
        assert_within(sequential, prefix_sum_f64(x), error_bound(x, np.float32))


@pytest.mark.parametrize(
    ("mesh_shape", "spec", "shape"),
    [
        ((4, 2), P("rows", "seq"), (6, 1001)),  # padded rows and an odd length
        ((1, 8), P(None, "seq"), (16, 1020)),  # 1020 = 8 * 127.5
        ((1, 8), P(None, "seq"), (4, 4)),  # fewer positions than sequence shards
    ],
    ids=str,
)
def test_uneven_lengths_fall_back_to_whole_rows(rng, mesh_shape, spec, shape):
    """An uneven array cannot be device_put, so it is laid out inside the program. The rule
    asks for whole rows, so the partitioner gathers the length axis: correct, and exactly
    the communication XLA's own cumsum has, no more, no less."""
    mesh = make_mesh(mesh_shape)
    sharding = NamedSharding(mesh, spec)
    x_host = rng.standard_normal(shape).astype(np.float32)
    c_host = rng.standard_normal(shape).astype(np.float32)

    def laid_out(fn):
        return lambda *args: fn(*(jax.lax.with_sharding_constraint(a, sharding) for a in args))

    with jax.set_mesh(mesh):
        got = jax.jit(laid_out(RULE))(x_host, c_host)
        reference = jax.jit(laid_out(REFERENCE))(x_host, c_host)
        rule, xla = (
            collectives(compiled_text(laid_out(fn), x_host))
            for fn in (prefix_sum, prefix_sum_reference)
        )
    check_against_oracles(x_host, c_host, got, reference)
    assert [(c.op, c.bytes) for c in rule] == [(c.op, c.bytes) for c in xla]
    # Whole rows arrive on each device: by an all-gather, or for tiny arrays an all-reduce.
    rows_per_device = shape[0] // mesh.shape["rows"] if "rows" in str(spec) else shape[0]
    largest = max((c.bytes for c in rule), default=0)
    assert largest >= rows_per_device * shape[1] * 4, rule


def test_empty_arrays():
    # (JAX gives empty results a replicated sharding, so only shapes are checked.)
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        for shape in [(16, 0), (0, 16)]:
            x = jax.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, P("rows", "seq")))
            for out in jax.jit(RULE)(x, x):
                assert out.shape == shape
                assert out.dtype == np.float32


def test_no_mesh_and_eager(rng):
    """Outside any mesh, eagerly and under jit, it is just a cumsum."""
    x = rng.standard_normal((3, 50))
    for fn in (prefix_sum, jax.jit(prefix_sum)):
        assert_within(fn(x), prefix_sum_f64(x), error_bound(x, np.float64))
    for fn in (suffix_sum, jax.jit(suffix_sum)):
        assert_within(fn(x), suffix_sum_f64(x), error_bound(x, np.float64, reverse=True))


def test_sharded_input_without_a_context_mesh(rng):
    """The mesh comes from the input's NamedSharding: no `jax.set_mesh` needed."""
    mesh = make_mesh((2, 4))
    x_host, x = place(rng, mesh, P("rows", "seq"))
    got = jax.jit(prefix_sum)(x)
    assert_within(got, prefix_sum_f64(x_host), error_bound(x_host, np.float32))
    assert got.sharding.is_equivalent_to(x.sharding, 2)
    assert [c.op for c in collectives(compiled_text(prefix_sum, x))] == ["all-gather"]


@pytest.mark.parametrize("op", [prefix_sum, suffix_sum], ids=lambda f: f.__name__)
def test_program_with_no_named_sharding(rng, op):
    """grad(sum(op(x))) does not depend on x, so x is pruned from the program, which then holds
    no NamedSharding: the partition callback gets a GSPMDSharding without axis names and must
    fall back to replicated arrays (reading `.mesh` off it would raise AttributeError)."""
    mesh = make_mesh((2, 4))
    _, x = place(rng, mesh, P("rows", "seq"))
    with jax.set_mesh(mesh):
        grad = jax.jit(jax.grad(lambda x: jnp.sum(op(x))))(x)
    # d/dx_j sum_i prefix_i = number of prefixes containing x_j = length - j (suffix: j + 1).
    counts = np.arange(SHAPE[1], 0, -1) if op is prefix_sum else np.arange(1, SHAPE[1] + 1)
    np.testing.assert_array_equal(grad, np.broadcast_to(counts, SHAPE).astype(np.float32))


def test_output_sharding_equals_input_sharding(rng):
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        for spec in [*SPECS, P(None, ("rows", "seq")), P(("seq", "rows"), None)]:
            sharding = NamedSharding(mesh, spec)
            _, x = place(rng, mesh, spec)
            for out in jax.jit(RULE)(x, x):
                assert out.sharding.is_equivalent_to(sharding, 2), (spec, out.sharding)


# --- the compiled programs ---------------------------------------------------------------------


def compiled_collectives(mesh, spec, prefix, differentiate, rng):
    """Collectives of the compiled forward (prefix(x)) or gradient (of sum(c * prefix(x))) of
    a sharded float32 input, and that input."""
    with jax.set_mesh(mesh):
        _, x = place(rng, mesh, spec)
        if differentiate:
            fn = jax.grad(lambda x, c: jnp.sum(prefix(x) * c))
            return collectives(compiled_text(fn, x, x)), x
        return collectives(compiled_text(prefix, x)), x


def shards(mesh, spec, dim):
    entry = ((*tuple(spec), None, None))[dim]
    return mesh.shape[entry] if entry else 1


@pytest.mark.parametrize("differentiate", [False, True], ids=["forward", "gradient"])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_rule_moves_only_block_totals(rng, spec, differentiate):
    mesh = make_mesh((2, 4))
    found, x = compiled_collectives(mesh, spec, prefix_sum, differentiate, rng)
    rows = x.shape[0] // shards(mesh, spec, 0)
    seq = shards(mesh, spec, 1)
    if seq == 1:  # rows are independent: nothing to communicate
        assert found == []
        return
    # One all-gather of (rows per device, sequence shards) totals, and nothing else.
    assert [c.op for c in found] == ["all-gather"], found
    assert found[0].bytes == rows * seq * x.dtype.itemsize
    # Tiny next to the rows XLA would gather: one number per block instead of 128.
    assert 100 * found[0].bytes <= x.nbytes // shards(mesh, spec, 0)


@pytest.mark.parametrize("differentiate", [False, True], ids=["forward", "gradient"])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_without_the_rule_xla_gathers_whole_rows(rng, spec, differentiate):
    mesh = make_mesh((2, 4))
    found, x = compiled_collectives(mesh, spec, prefix_sum_reference, differentiate, rng)
    if shards(mesh, spec, 1) == 1:  # XLA partitions a row-sharded cumsum by itself
        assert found == []
        return
    largest = max((c.bytes for c in found if c.op == "all-gather"), default=0)
    assert largest >= x.nbytes // shards(mesh, spec, 0), found


# --- transforms and pins -----------------------------------------------------------------------


def test_reverse_mode_to_second_order(rng):
    """Each backward rule calls the other custom_vjp function, so grad of grad works."""
    x = jnp.asarray(rng.standard_normal((3, 20)))
    check_grads(prefix_sum, (x,), order=2, modes=["rev"])
    check_grads(suffix_sum, (x,), order=2, modes=["rev"])
    check_grads(lambda x: jnp.sum(jnp.sin(prefix_sum(x))), (x,), order=2, modes=["rev"])


def test_forward_mode_is_not_available(rng):
    x = jnp.asarray(rng.standard_normal((3, 20)))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(prefix_sum, (x,), (x,))


def test_vmap_is_not_available_fold_instead(rng):
    # custom_partitioning has no batching rule. Extra leading axes fold into the rows.
    xs = rng.standard_normal((3, 4, 32)).astype(np.float32)
    with pytest.raises(NotImplementedError, match="Batching rule for 'custom_partitioning'"):
        jax.vmap(prefix_sum)(xs)
    folded = prefix_sum(xs.reshape(12, 32)).reshape(3, 4, 32)
    bound = error_bound(xs.reshape(12, 32), np.float32).reshape(3, 4, 32)
    assert_within(folded, np.cumsum(xs.astype(np.float64), axis=2), bound)


def test_sharded_export_is_not_available():
    # The partition callback is Python, needed again whenever the program is partitioned,
    # and jax.export cannot serialize it.
    mesh = make_mesh((2, 4))
    sharding = NamedSharding(mesh, P("rows", "seq"))
    spec = jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=sharding)
    with (
        jax.set_mesh(mesh),
        pytest.raises(NotImplementedError, match="serialization of host_callbacks"),
    ):
        export.export(jax.jit(prefix_sum, in_shardings=sharding))(spec)


def test_single_device_export_works(rng):
    # With nothing to partition the op lowers to its plain body, and export succeeds.
    spec = jax.ShapeDtypeStruct((4, 16), jnp.float32)
    # For the CPU, where conftest.py runs the call: export's default platform is the default
    # backend's (a TPU host's TPU), and an artifact runs only on a platform it was exported for.
    exported = export.export(jax.jit(prefix_sum), platforms=("cpu",))(spec)
    exported = export.deserialize(exported.serialize())
    x = rng.standard_normal((4, 16)).astype(np.float32)
    assert_within(exported.call(x), prefix_sum_f64(x), error_bound(x, np.float32))


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [prefix_sum, suffix_sum], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("x", "error", "message"),
    [
        (np.ones(8, np.float32), ValueError, r"shape \(rows, length\), got shape \(8,\)"),
        (np.ones((2, 3, 4), np.float32), ValueError, r"got shape \(2, 3, 4\)"),
        (np.float32(1.0), ValueError, r"got shape \(\)"),
        (np.ones((2, 8), np.int32), TypeError, "floating-point x, got int32"),
        (np.ones((2, 8), bool), TypeError, "floating-point x, got bool"),
        (np.ones((2, 8), np.complex64), TypeError, "floating-point x, got complex64"),
    ],
)
def test_bad_input_raises_clear_error(fn, x, error, message):
    with pytest.raises(error, match=message):
        fn(x)


# --- the host ----------------------------------------------------------------------------------


def test_meshes_and_oracles_use_the_cpu_devices_on_a_one_accelerator_host(monkeypatch, rng):
    """On a host with one accelerator (a TPU v5e chip, say) jax.devices() has one device: the
    meshes must still be the 8 simulated CPU devices, and unsharded calls run on the CPU device
    (conftest.py), not on the accelerator's emulated float64."""
    cpu = jax.devices("cpu")
    real_devices = jax.devices

    def one_accelerator(backend=None):
        return real_devices(backend) if backend is not None else real_devices("cpu")[:1]

    monkeypatch.setattr(jax, "devices", one_accelerator)
    mesh = make_mesh((2, 4))
    assert list(mesh.devices.flat) == cpu[:8]
    assert jnp.zeros((), jnp.float64).devices() == {cpu[0]}
