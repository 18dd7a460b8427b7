"""Sharding on 8 simulated CPU devices (see conftest.py): a row-sharded input
is computed shard by shard, forward and backward, with explicit and with auto
mesh axes, and the compiled program communicates no more than the plain-JAX
reference's own program does.

tests/conformance/ checks one axis sharded on simple meshes; these cases add
2-D meshes, specs that leave mesh axes unnamed, several sharded leading axes,
shard_maps that leave a mesh axis free, and the result's sharding. Gradients
are taken against a random cotangent: the gradient of sum(op(x)) is not a
general check (for an op whose rows sum to a constant, a softmax say, it is
identically zero)."""

import re
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from {{ cookiecutter.package_name }}.rowwise import REDUCED

from compare import assert_close
from conformance import oracle, vjp_oracle
from op_spec import SPEC

op, reference = SPEC.op, SPEC.reference
VALUES, GRADIENTS = SPEC.tolerance, SPEC.gradient_tolerance


def unsharded(a):
    return jnp.asarray(np.asarray(a))


def want(x):
    return oracle(SPEC, [unsharded(x)])[0]


def want_grad(x, cotangent):
    return vjp_oracle(SPEC, [unsharded(x)], [unsharded(cotangent)])[0]


COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
# An instruction is "<shape> <opcode>(<operands>)"; async ones end in -start.
INSTRUCTION = re.compile(r"\s(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def collectives(f, *args):
    """How many instructions of each collective the compiled program of f has."""
    return Counter(INSTRUCTION.findall(jax.jit(f).lower(*args).compile().as_text()))


def assert_no_more_communication(f, reference, *args):
    got, allowed = collectives(f, *args), collectives(reference, *args)
    extra = got - allowed  # Counter subtraction keeps what exceeds the reference
    assert not extra, f"communicates {dict(got)}; the reference only {dict(allowed)}"


def make_mesh(shape, names, axis_type=AxisType.Explicit):
    # Explicit axes (jax.make_mesh's default): every array's sharding is part
    # of its type. Auto axes: XLA's partitioner chooses the shardings inside
    # jit. The op's sharding rule (rowwise.py) serves both.
    cpus = jax.devices("cpu")
    assert len(cpus) == 8, "conftest.py should have made 8 CPU devices"
    return jax.make_mesh(shape, names, axis_types=(axis_type,) * len(shape), devices=cpus)


MESHES = {"1d": ((8,), ("rows",)), "2d": ((2, 4), ("rows", "cols"))}

# Leading (row) axes sharded: on a 1-D mesh, and on a 2-D mesh over one axis
# (the other unnamed by the spec), over both at once, and over two leading axes.
CASES = [
    ("1d", (64, 32), P("rows")),
    ("1d", (8, 4, 16), P("rows")),
    ("1d", (4, 16, 32), P(None, "rows")),
    ("2d", (16, 32), P("rows", None)),
    ("2d", (16, 32), P("cols", None)),
    ("2d", (16, 32), P(("rows", "cols"), None)),
    ("2d", (8, 4, 16), P("rows", "cols", None)),
    ("2d", (8, 4, 16), P(None, "cols", None)),
]


AXIS_TYPES = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}


def case_id(case):
    axis_type, mesh, shape, spec = case
    return f"{axis_type}-{mesh}-{'x'.join(map(str, shape))}-{spec}"


@pytest.fixture(params=[(t, *case) for t in AXIS_TYPES for case in CASES], ids=case_id)
def sharded(request, rng):
    """(x, cotangent), both sharded as the case says."""
    axis_type, mesh_name, shape, spec = request.param
    sharding = NamedSharding(make_mesh(*MESHES[mesh_name], AXIS_TYPES[axis_type]), spec)
    x, cotangent = (jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(2))
    return jax.device_put(x, sharding), jax.device_put(cotangent, sharding)


def grad_of_weighted_sum(f):
    return jax.grad(lambda x, cotangent: jnp.sum(cotangent * f(x)))


def test_collectives_are_counted(sharded):
    # The counter finds the all-reduce that a sum over sharded rows needs, so
    # "no more than the reference" below is not vacuously true.
    x, _ = sharded
    assert collectives(jnp.sum, x)["all-reduce"] >= 1


def test_sharded_forward_communicates_no_more_than_the_reference(sharded):
    x, _ = sharded
    assert_no_more_communication(op, reference, x)
    y = jax.jit(op)(x)
    assert y.sharding.is_equivalent_to(x.sharding, x.ndim)
    assert_close(y, want(x), VALUES)


def test_sharded_gradient_communicates_no_more_than_the_reference(sharded):
    x, cotangent = sharded
    assert_no_more_communication(
        grad_of_weighted_sum(op), grad_of_weighted_sum(reference), x, cotangent
    )
    got = jax.jit(grad_of_weighted_sum(op))(x, cotangent)
    assert got.sharding.is_equivalent_to(x.sharding, x.ndim)
    assert_close(got, want_grad(x, cotangent), GRADIENTS)


@pytest.mark.parametrize("axis_type", list(AXIS_TYPES))
@pytest.mark.parametrize(
    ("mesh_name", "shape", "spec"),
    [
        ("2d", (8, 16), P("rows", "cols")),
        ("2d", (8, 16), P(None, "cols")),
        ("1d", (16,), P("rows")),
    ],
    ids=str,
)
def test_a_sharded_last_axis(rng, mesh_name, shape, spec, axis_type):
    # Where each row must be whole on one device (rowwise.REDUCED names the
    # row), a sharded last axis costs an all-gather that the reference (which
    # sums partial rows with an all-reduce, say) may not have; the results are
    # still right, and sharded like x. An element-wise op (REDUCED empty)
    # computes each block where it lies: no more communication than the
    # reference.
    x, cotangent = (jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(2))
    mesh = make_mesh(*MESHES[mesh_name], AXIS_TYPES[axis_type])
    sharded = jax.device_put(x, NamedSharding(mesh, spec))
    if not REDUCED:
        assert_no_more_communication(op, reference, sharded)
        assert_no_more_communication(
            grad_of_weighted_sum(op), grad_of_weighted_sum(reference), sharded, sharded
        )
    y = jax.jit(op)(sharded)
    assert y.sharding.is_equivalent_to(sharded.sharding, x.ndim)
    assert_close(y, want(x), VALUES)
    got = jax.jit(grad_of_weighted_sum(op))(sharded, cotangent)
    assert_close(got, want_grad(x, cotangent), GRADIENTS)


@pytest.mark.parametrize("mesh_name", list(MESHES))
def test_inside_shard_map_the_call_runs_on_each_block(rng, mesh_name):
    # Wrapped in shard_map by the caller, the op sees one block of rows per
    # device and calls the handler on it as it is, gradient included.
    mesh = make_mesh(*MESHES[mesh_name], axis_type=AxisType.Auto)
    x, cotangent = (
        jax.device_put(jnp.asarray(rng.standard_normal((64, 32)), jnp.float32), sharding)
        for sharding in [NamedSharding(mesh, P("rows"))] * 2
    )

    def local(f):
        return jax.shard_map(f, mesh=mesh, in_specs=P("rows"), out_specs=P("rows"))

    assert_no_more_communication(local(op), local(reference), x)
    assert_no_more_communication(
        grad_of_weighted_sum(local(op)),
        grad_of_weighted_sum(local(reference)),
        x,
        cotangent,
    )
    assert_close(jax.jit(local(op))(x), want(x), VALUES)
    got = jax.jit(grad_of_weighted_sum(local(op)))(x, cotangent)
    assert_close(got, want_grad(x, cotangent), GRADIENTS)


@pytest.mark.parametrize("axis_type", list(AXIS_TYPES))
@pytest.mark.parametrize(
    ("shape", "spec"),
    [
        ((16, 32), P(("rows", "cols"), None)),
        ((8, 4, 16), P("rows", "cols", None)),
    ],
    ids=str,
)
def test_inside_a_shard_map_that_leaves_an_axis_free(rng, shape, spec, axis_type):
    # shard_map over "rows" only (axis_names): inside it, x's rows are still
    # split over the free axis "cols", which the partitioner handles. The
    # partition callback then gets no mesh, only XLA's tiling of x over the
    # free axes (rowwise._on_free_axes): read wrongly, every block is
    # gathered onto every device, with right values and shardings.
    mesh = make_mesh(*MESHES["2d"], AXIS_TYPES[axis_type])
    x, cotangent = (
        jax.device_put(jnp.asarray(rng.standard_normal(shape), jnp.float32), sharding)
        for sharding in [NamedSharding(mesh, spec)] * 2
    )

    def local(f):
        return jax.shard_map(
            f, mesh=mesh, in_specs=P("rows"), out_specs=P("rows"), axis_names={"rows"}
        )

    assert_no_more_communication(local(op), local(reference), x)
    assert_no_more_communication(
        grad_of_weighted_sum(local(op)), grad_of_weighted_sum(local(reference)), x, cotangent
    )
    y = jax.jit(local(op))(x)
    assert y.sharding.is_equivalent_to(x.sharding, x.ndim)
    assert_close(y, want(x), VALUES)
    got = jax.jit(grad_of_weighted_sum(local(op)))(x, cotangent)
    assert_close(got, want_grad(x, cotangent), GRADIENTS)
