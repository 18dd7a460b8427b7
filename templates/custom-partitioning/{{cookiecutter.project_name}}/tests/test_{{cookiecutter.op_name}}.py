"""The sharded op against the plain-JAX reference on 8 simulated CPU devices:
values, indices, gradients, output sharding, and the compiled programs'
collectives, which prove the rule is used."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }} as top_k
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}_reference as top_k_reference
from {{ cookiecutter.package_name }}.hlo import collectives, compiled_text

from compare import assert_close
from devices import mesh_devices
from oracle import GRADIENTS, VALUES, quantized_with_ties, top_k_f64, top_k_vjp_f64

# (batch devices, item devices): 8 either way, both 2-D splits, and one device.
MESH_SHAPES = [(8, 1), (1, 8), (4, 2), (2, 4), (1, 1)]
SPECS = [P(), P("batch", None), P(None, "items"), P("batch", "items")]
K = 4
SHARD_ITEMS = {{ "True" if cookiecutter.sharded_axes == "batch,items" else "False" }}  # the rule keeps items sharded
SOFTMAX = {{ "True" if cookiecutter.normalize == "softmax" else "False" }}  # values are softmax probabilities


def make_mesh(shape, axis_type=AxisType.Auto):
    # Auto axes by default: custom_partitioning does not run under Explicit
    # axes, the default of jax.make_mesh since JAX 0.9 (there the op runs its
    # per-shard functions under shard_map).
    devices = mesh_devices(shape[0] * shape[1])
    return jax.make_mesh(shape, ("batch", "items"), axis_types=(axis_type,) * 2, devices=devices)


def place(rng, mesh, spec, shape=(16, 1024), dtype="float32", ties=False):
    """A host array and its sharded copy: normal draws, or quantized_with_ties."""
    if ties:
        x = quantized_with_ties(rng, shape, dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    return x, jax.device_put(x, NamedSharding(mesh, spec))


def loss(x, cotangent, k):
    return jnp.sum(cotangent * top_k(x, k)[0])


# One jitted function per program, shared by every test: jit keeps what it
# compiled for each input shape, dtype and sharding (and mesh), so a test that
# runs an input layout another test already ran (ties after normal draws, the
# collectives and output-sharding checks after both) compiles nothing. Compiling
# is most of these tests' time, and JAX's persistent compilation cache never
# holds a custom_partitioning program: its key includes the address of the
# partition callback, new in each process.
top_k_of = jax.jit(top_k, static_argnums=1)
grad_of = jax.jit(jax.grad(loss), static_argnums=2)
reference_of = jax.jit(top_k_reference, static_argnums=1)


def shards(mesh, axis):
    return mesh.shape[axis]


def check_against_oracles(x_host, values, indices, k=K):
    want_values, want_indices = top_k_f64(x_host, k)
    np.testing.assert_array_equal(indices, want_indices)
    reference_values, _ = reference_of(x_host, k)
    assert_close(values, reference_values, VALUES)
    assert_close(values, want_values, VALUES)


def check_sharded_top_k(rng, mesh_shape, spec, ties=False):
    """The op on an input placed with spec on a mesh of mesh_shape (normal
    draws, or quantized_with_ties), against the oracles."""
    mesh = make_mesh(mesh_shape)
    with jax.set_mesh(mesh):
        x_host, x = place(rng, mesh, spec, ties=ties)
        values, indices = top_k_of(x, K)
    check_against_oracles(x_host, values, indices)


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_values_and_indices_match_reference(rng, mesh_shape, spec):
    check_sharded_top_k(rng, mesh_shape, spec)


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("mesh_shape", MESH_SHAPES, ids=str)
def test_ties_go_to_the_lower_index_within_and_across_shards(rng, mesh_shape, spec):
    # Normal draws never tie. Here every row's top k is a choice among equal
    # values, some split across item shards: a merge that takes candidates out
    # of shard order, or an unstable sort, returns other indices.
    check_sharded_top_k(rng, mesh_shape, spec, ties=True)


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1), (1, 8)], ids=str)
def test_gradients_match_reference(rng, mesh_shape, spec):
    mesh = make_mesh(mesh_shape)
    for ties in (False, True):  # ties put winners on the first and last item of shards
        with jax.set_mesh(mesh):
            x_host, x = place(rng, mesh, spec, ties=ties)
            cotangent = rng.standard_normal((x.shape[0], K)).astype(np.float32)
            grad = grad_of(x, cotangent, K)
        assert_close(grad, top_k_vjp_f64(x_host, K, cotangent), GRADIENTS)


def test_float64_and_k_edges(rng):
    # The k edges in float64 only: float64 also proves nothing is computed in
    # float32, and the other tests run float32 (each k is another compile).
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        for k in (1, 256, 257, 1024):  # 256 items per shard: k above that needs whole rows
            for ties in (False, True):  # k = 256 merges every item of every shard
                x_host, x = place(rng, mesh, P("batch", "items"), dtype="float64", ties=ties)
                values, indices = top_k_of(x, k)
                check_against_oracles(x_host, values, indices, k)


@pytest.mark.parametrize("shape", [(6, 1024), (16, 1001)], ids=str)
def test_uneven_sizes(rng, shape):
    # 6 rows on 4 batch shards, 1001 items on 2 item shards: XLA pads the
    # shards; padded rows are dropped, and uneven items fall back to whole rows.
    # Every item is below -1: padding (zeros on the CPU), if it got in, would win.
    mesh = make_mesh((4, 2))
    sharding = NamedSharding(mesh, P("batch", "items"))
    x_host = -1 - np.abs(rng.standard_normal(shape)).astype(np.float32)
    cotangent = rng.standard_normal((shape[0], K)).astype(np.float32)

    def loss_and_outputs(x):
        x = jax.lax.with_sharding_constraint(x, sharding)
        values, indices = top_k(x, K)
        return jnp.sum(cotangent * values), (values, indices)

    step = jax.jit(jax.value_and_grad(loss_and_outputs, has_aux=True))
    with jax.set_mesh(mesh):
        (_, (values, indices)), grad = step(jnp.asarray(x_host))
    check_against_oracles(x_host, values, indices)
    assert_close(grad, top_k_vjp_f64(x_host, K, cotangent), GRADIENTS)


def test_numpy_input_under_a_mesh(rng):
    # No NamedSharding anywhere in the program: the rule must still work
    # (it falls back to whole, replicated operands).
    x_host = rng.standard_normal((16, 64)).astype(np.float32)
    cotangent = rng.standard_normal((16, K)).astype(np.float32)
    with jax.set_mesh(make_mesh((2, 4))):
        values, indices = top_k_of(x_host, K)
        grad = grad_of(x_host, cotangent, K)
    check_against_oracles(x_host, values, indices)
    assert_close(grad, top_k_vjp_f64(x_host, K, cotangent), GRADIENTS)


def test_output_sharding_is_the_one_the_rule_promises(rng):
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        for spec, promised in [
            (P("batch", "items"), P("batch", None)),
            (P("batch", None), P("batch", None)),
            (P(None, "items"), P(None, None)),
        ]:
            _, x = place(rng, mesh, spec)
            for out in top_k_of(x, K):
                assert out.sharding.is_equivalent_to(NamedSharding(mesh, promised), 2), spec


# --- the compiled programs: the proof that the rule is used --------------------


def allowed_collectives(mesh, spec, x, k=K):
    """What the rule may communicate for this input: (op, largest bytes) pairs."""
    batch_axis, item_axis = (tuple(spec) + (None, None))[:2]
    batch = shards(mesh, "batch") if batch_axis else 1
    items = shards(mesh, "items") if item_axis else 1
    rows = x.shape[0] // batch
    if items == 1:
        return {}
    if not SHARD_ITEMS:  # the rule asks for whole rows: the items axis is gathered
        return {"all-gather": x.nbytes // batch}
    allowed = {"all-gather": rows * k * items * 8}  # k candidates per shard, value + index
    if SOFTMAX:
        allowed["all-reduce"] = rows * x.dtype.itemsize  # row max, then row sum
    return allowed


@pytest.mark.parametrize("differentiate", [False, True], ids=["forward", "grad"])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_only_the_collectives_the_math_needs(rng, spec, differentiate):
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        _, x = place(rng, mesh, spec)
        # The programs the value and gradient tests ran (jit's AOT API, which
        # compiled_text uses too, finds them in jit's cache).
        if differentiate:
            cotangent = np.ones((x.shape[0], K), x.dtype)
            compiled = grad_of.lower(x, cotangent, K).compile()
        else:
            compiled = top_k_of.lower(x, K).compile()
        found = collectives(compiled.as_text())
    allowed = allowed_collectives(mesh, spec, x)
    for collective in found:
        assert collective.op in allowed, f"unexpected {collective} for {spec}"
        assert collective.bytes <= allowed[collective.op], f"{collective} moves too much"
    assert {c.op for c in found} == set(allowed), (found, allowed)


@pytest.mark.parametrize("spec", [P("batch", None), P("batch", "items")], ids=str)
def test_without_the_rule_xla_gathers_the_whole_array(rng, spec):
    mesh = make_mesh((2, 4))
    with jax.set_mesh(mesh):
        _, x = place(rng, mesh, spec)
        found = collectives(compiled_text(lambda x: top_k_reference(x, K), x))
    largest = max((c.bytes for c in found if c.op == "all-gather"), default=0)
    assert largest >= x.nbytes // shards(mesh, "batch"), found


# --- transforms --------------------------------------------------------------------
# Eager calls and check_grads (orders 1 and 2, unsharded) are cells of
# tests/test_conformance.py; here, what the matrix does not cover.


def test_vmap_folds_into_the_rows(rng):
    # custom_partitioning has no batching rule: a custom_vmap folds the vmapped
    # axis into the rows, on sharded rows too (tests/test_conformance.py has
    # the unsharded vmap cells).
    mesh = make_mesh((2, 4))
    xs, placed = place(rng, mesh, P(None, "batch", "items"), shape=(3, 4, 32))
    values, indices = jax.jit(jax.vmap(lambda x: top_k(x, 2)))(placed)
    want_values, want_indices = top_k_f64(xs.reshape(12, 32), 2)
    np.testing.assert_array_equal(indices, want_indices.reshape(3, 4, 2))
    assert_close(values, want_values.reshape(3, 4, 2), VALUES)


def second_order(op, x, cotangent, v):
    """Reverse over reverse: the gradient of <v, the gradient of the loss> with
    respect to x (a Hessian-vector product) and to the cotangent."""

    def gradient_along_v(x, cotangent):
        grad = jax.grad(lambda x: jnp.sum(cotangent * op(x, K)[0]))(x)
        return jnp.sum(v * grad)

    return jax.grad(gradient_along_v, argnums=(0, 1))(x, cotangent)


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_second_order_on_explicit_axes(rng, spec):
    # The second-order rules gather at the winners from an array laid out like
    # x; under Explicit axes with the items split, JAX must be told how that
    # gather's result is laid out, or it refuses to trace (ShardingTypeError).
    mesh = make_mesh((2, 4), AxisType.Explicit)
    x_host, x = place(rng, mesh, spec, shape=(16, 64))
    cotangent = rng.standard_normal((16, K)).astype(np.float32)
    v = rng.standard_normal((16, 64)).astype(np.float32)
    got = jax.jit(partial(second_order, top_k))(x, cotangent, jax.device_put(v, x.sharding))
    want = second_order(top_k_reference, *(a.astype(np.float64) for a in (x_host, cotangent, v)))
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, GRADIENTS)


def test_sharded_export_is_not_available(rng):
    # The partition callback is Python: an exported sharded program would need
    # it at run time, and jax.export cannot serialize it.
    mesh = make_mesh((2, 4))
    sharding = NamedSharding(mesh, P("batch", "items"))
    spec = jax.ShapeDtypeStruct((16, 1024), jnp.float32, sharding=sharding)
    with jax.set_mesh(mesh):
        with pytest.raises(NotImplementedError, match="serialization of host_callbacks"):
            export.export(jax.jit(lambda x: top_k(x, K), in_shardings=sharding))(spec)


# --- bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "k", "error", "message"),
    [
        (np.float32(1), 2, ValueError, "shape \\(batch, items\\)"),
        (np.ones((2, 8), np.int32), 2, TypeError, "floating-point"),
        (np.ones((2, 8), np.float32), 0, ValueError, "k must be an int in \\[1, 8\\]"),
        (np.ones((2, 8), np.float32), 9, ValueError, "k must be an int in \\[1, 8\\]"),
        (np.ones((2, 8), np.float32), 2.0, ValueError, "k must be an int"),
    ],
)
def test_bad_input_raises_clear_error(x, k, error, message):
    with pytest.raises(error, match=message):
        top_k(x, k)
