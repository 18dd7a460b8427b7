"""The example's own tests (delete them with an op of your own: the
conformance matrix and tests/test_reference.py test any op from its
declaration): the primitive against the float64 NumPy oracle and the plain-JAX
reference, at the edges of the band, through each of its rules, sharded,
exported, and on bad input."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
{%- if cookiecutter.api == "hijax" %}
from jax.experimental import hijax
{%- endif %}
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P
{%- if cookiecutter.api == "hijax" %}

# api=hijax needs JAX 0.11 (HiPrim): under 0.10 the package refuses to import,
# which tests/test_jax_api_surface.py checks; the rest of the suite skips.
if not hasattr(hijax, "HiPrim"):
    pytest.skip("api=hijax needs JAX 0.11 or newer", allow_module_level=True)

# isort: split
{%- endif %}
{%- if cookiecutter.lowering == "ffi" %}

from {{ cookiecutter.package_name }}.ffi_target import TARGET
{%- endif %}

from compare import assert_close
from devices import mesh_devices
from op_spec import (
    GRADIENTS,
    SPEC,
    THROUGH_A_LOSS,
    VALUES,
    matvec_f64,
    matvec_vjp_f64,
)

matvec, matvec_reference = SPEC.op, SPEC.reference
NAME = SPEC.name  # the op's name, which its error messages start with

# (*batch, n): n = 1 and 2 (the ignored corners are all there is), odd n, batches.
# (Larger sizes add nothing: every entry is computed the same way.)
SHAPES = [(1,), (2,), (7,), (4, 1), (2, 3, 64)]
DTYPES = ["float32", "float64"]
ALL = (0, 1, 2, 3)


def shape_id(shape):
    return "x".join(map(str, shape))


def operands(rng, shape, dtype="float32"):
    return [jnp.asarray(rng.standard_normal(shape), dtype) for _ in range(4)]


def primitive_names(jaxpr):
{%- if cookiecutter.api == "hijax" %}
    """The primitive of each equation. Every HiPrim binds JAX's one
    `call_hi_primitive`; the HiPrim itself is in the equation's params."""
    return [
        type(e.params["_prim"]).__name__
        if e.primitive.name == "call_hi_primitive"
        else e.primitive.name
        for e in jaxpr.eqns
    ]


PRIMITIVE = "{{ cookiecutter.op_name.title().replace("_", "") }}"
{%- else %}
    """The primitive of each equation."""
    return [e.primitive.name for e in jaxpr.eqns]


PRIMITIVE = NAME
{%- endif %}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_values_match_float64_oracle(rng, shape, dtype, jit):
    args = operands(rng, shape, dtype)
    f = jax.jit(matvec) if jit else matvec
    got = f(*args)
    assert got.dtype == jnp.dtype(dtype)
    assert_close(got, matvec_f64(*args), VALUES)


def test_ignored_corners_do_not_matter(rng):
    dl, d, du, x = operands(rng, (5, 8))
    moved = matvec(dl.at[:, 0].set(1e3), d, du.at[:, -1].set(-1e3), x)
    np.testing.assert_array_equal(moved, matvec(dl, d, du, x))
    # Not even an inf or a NaN there reaches y, and their gradients are zero.
    nonfinite = matvec(dl.at[:, 0].set(jnp.nan), d, du.at[:, -1].set(jnp.inf), x)
    np.testing.assert_array_equal(nonfinite, matvec(dl, d, du, x))
    g_dl, g_du = jax.grad(lambda a, c: jnp.sum(matvec(a, d, c, x)), argnums=(0, 1))(dl, du)
    np.testing.assert_array_equal(g_dl[:, 0], 0.0)
    np.testing.assert_array_equal(g_du[:, -1], 0.0)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)], ids=shape_id)
def test_empty_operands_keep_their_shape(rng, shape):
    args = operands(rng, shape)
    assert matvec(*args).shape == shape
    assert jax.jit(matvec)(*args).shape == shape
    grads = jax.jit(jax.grad(lambda *a: jnp.sum(matvec(*a)), argnums=ALL))(*args)
    assert [g.shape for g in grads] == [shape] * 4


def test_jaxpr_holds_the_primitive_as_one_equation(rng):
    jaxpr = jax.make_jaxpr(matvec)(*operands(rng, (3, 8))).jaxpr
    assert primitive_names(jaxpr) == [PRIMITIVE]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_gradients_match_float64_oracle(rng, shape, dtype):
    args = operands(rng, shape, dtype)
    cotangent = jnp.asarray(rng.standard_normal(shape), dtype)

    def loss(*args):
        return jnp.sum(cotangent * matvec(*args))

    got = jax.jit(jax.grad(loss, argnums=ALL))(*args)
    for g, w in zip(got, matvec_vjp_f64(*args, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_jvp_matches_float64_oracle(rng, shape):
    args = operands(rng, shape, "float64")
    tangents = operands(rng, shape, "float64")
    y, ty = jax.jit(lambda a, t: jax.jvp(matvec, a, t))(tuple(args), tuple(tangents))
    dl, d, du, x = args
    tdl, td, tdu, tx = tangents
    want = matvec_f64(tdl, td, tdu, x) + matvec_f64(dl, d, du, tx)
    assert_close(y, matvec_f64(*args), VALUES)
    assert_close(ty, want, VALUES)


@pytest.mark.parametrize("argnums", [(0, 3)], ids=str)
def test_partial_gradients_match_reference(rng, argnums):
    # Symbolic-zero tangents take other paths through the JVP and transpose rules
    # (the conformance matrix's grad-<arg> cells take one argument, vjp all).
    args = operands(rng, (3, 9), "float64")

    def loss(f):
        return lambda *a: jnp.sum(jnp.sin(f(*a)))

    got = jax.grad(loss(matvec), argnums=argnums)(*args)
    want = jax.grad(loss(matvec_reference), argnums=argnums)(*args)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, THROUGH_A_LOSS)


# Forward mode over many tangents at once: each is a function of (the op, a
# stack of tangents per operand) returning a function of the operands.
FORWARD_BATCHED = {
    "jacfwd": lambda f, _: jax.jacfwd(f, argnums=ALL),
    "hessian": lambda f, _: jax.hessian(lambda *a: jnp.sum(jnp.sin(f(*a))), argnums=ALL),
    "vmap-jvp": lambda f, tangents: (
        lambda *a: jax.vmap(lambda *t: jax.jvp(f, a, t), out_axes=(None, 0))(*tangents)
    ),
}


@pytest.mark.parametrize("transform", FORWARD_BATCHED.values(), ids=FORWARD_BATCHED.keys())
def test_forward_mode_over_many_tangents_matches_reference(rng, transform):
    # These batch the tangents, not the operands: the batching rule then also
    # sees calls with nothing batched (the JVP's primal result), whose results
    # must stay unbatched.
    args = operands(rng, (2, 5), "float64")
    tangents = operands(rng, (3, 2, 5), "float64")
    got = jax.jit(transform(matvec, tangents))(*args)
    want = transform(matvec_reference, tangents)(*args)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert_close(g, w, THROUGH_A_LOSS)


def test_linearize_and_linear_transpose_match_oracle(rng):
    dl, d, du, x = operands(rng, (3, 10), "float64")
    tx, ct = operands(rng, (3, 10), "float64")[:2]
    y, f_lin = jax.linearize(lambda x: matvec(dl, d, du, x), x)
    assert_close(f_lin(tx), matvec_f64(dl, d, du, tx), VALUES)
    (ct_x,) = jax.linear_transpose(lambda x: matvec(dl, d, du, x), x)(ct)
    assert_close(ct_x, matvec_vjp_f64(dl, d, du, x, ct)[3], VALUES)
    # Transposing with respect to the bands, x fixed.
    ct_bands = jax.linear_transpose(lambda *b: matvec(*b, x), dl, d, du)(ct)
    for g, w in zip(ct_bands, matvec_vjp_f64(dl, d, du, x, ct)[:3], strict=True):
        assert_close(g, w, VALUES)


def test_vmap_over_other_axes_is_one_call(rng):
    dl, d, du = operands(rng, (12,))[:3]
    xs = jnp.asarray(rng.standard_normal((12, 5)), jnp.float32)  # batch on axis 1
    f = jax.vmap(matvec, in_axes=(None, None, None, 1), out_axes=1)
    got = f(dl, d, du, xs)
    assert_close(got, matvec_f64(dl, d, du, xs.T).T, VALUES)
    # The batching rule makes one call on a batched shape, not one per row.
    assert primitive_names(jax.make_jaxpr(f)(dl, d, du, xs).jaxpr).count(PRIMITIVE) == 1


def test_nested_vmap_with_mixed_axes(rng):
    dl = jnp.asarray(rng.standard_normal((4, 9)), jnp.float32)  # batched on axis 0
    d = jnp.asarray(rng.standard_normal((9,)), jnp.float32)  # shared
    du = jnp.asarray(rng.standard_normal((9, 4)), jnp.float32)  # batched on axis 1
    x = jnp.asarray(rng.standard_normal((3, 9, 4)), jnp.float32)  # outer axis 0, inner axis 2
    inner = jax.vmap(matvec, in_axes=(0, None, 1, 1))
    outer = jax.vmap(inner, in_axes=(None, None, None, 0))
    got = outer(dl, d, du, x)
    want = np.stack(
        [[matvec_f64(dl[j], d, du[:, j], x[i, :, j]) for j in range(4)] for i in range(3)]
    )
    assert_close(got, want, VALUES)


def test_export_round_trip(rng):
    args = operands(rng, (3, 16))
    specs = [jax.ShapeDtypeStruct(export.symbolic_shape("b, n"), jnp.float32)] * 4
{%- if cookiecutter.lowering == "ffi" %}
    # On the CPU the primitive lowers to a custom call to this project's
    # handler, which export refuses unless told: its target is not one of
    # XLA's, so the artifact runs only where this package registered it.
    checks = [export.DisabledSafetyCheck.custom_call(TARGET)]
    exported = export.export(jax.jit(matvec), platforms=("cpu",), disabled_checks=checks)(*specs)
    assert re.search(rf"custom_call @{TARGET}\b", exported.mlir_module())
    # The artifact is the CPU's: call it there even where a GPU is the default.
    args = jax.device_put(args, jax.devices("cpu")[0])
{%- else %}
    exported = export.export(jax.jit(matvec))(*specs)
    # The primitive lowered to plain StableHLO: no custom call but the shape
    # assertions of the symbolic shapes, so the artifact loads where the
    # primitive is not registered.
    assert not re.search(r"custom_call @(?!shape_assertion)", exported.mlir_module())
{%- endif %}
    loaded = export.deserialize(exported.serialize())
    assert_close(loaded.call(*args), matvec_f64(*args), VALUES)


{%- if cookiecutter.lowering == "ffi" %}


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)], ids=str)
def test_the_custom_call_names_every_axis_but_the_last_a_batch_axis(shape):
    """XLA may run a batch-partitionable custom call (ffi_target.py) on each
    device's part of its first num_batch_dims axes: every axis but the last,
    which couples neighbours. Read from the lowered module: JAX 0.12.1 shards
    the call along an explicit mesh's axes from the types alone, so only
    older JAX shows a wrong count as communication."""
    specs = [jax.ShapeDtypeStruct(shape, jnp.float32)] * 4
    module = jax.jit(matvec).trace(*specs).lower(lowering_platforms=("cpu",)).as_text()
    assert f'num_batch_dims = "{len(shape) - 1}"' in module
{%- endif %}


def test_sharded_batch_needs_no_communication(rng):
    mesh = jax.make_mesh((8,), ("batch",), devices=mesh_devices(8))
    args = operands(rng, (16, 32))
    with jax.set_mesh(mesh):
        sharded = [jax.device_put(a, P("batch", None)) for a in args]
        forward = jax.jit(matvec)
        out = forward(*sharded)
        assert out.sharding.spec == P("batch", None)

        def loss(*a):
            return jnp.sum(matvec(*a) ** 2)

        backward = jax.jit(jax.grad(loss, argnums=ALL))
        for fn in (forward, backward):
            hlo = fn.lower(*sharded).compile().as_text()
            for collective in ("all-gather", "all-to-all", "collective-permute"):
                assert collective not in hlo, collective
        # The loss's sum is the only reduction across devices.
        assert "all-reduce" not in forward.lower(*sharded).compile().as_text()
    assert_close(out, matvec_f64(*args), VALUES)


def _in_shard_map(fn, in_specs, out_specs):
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,), devices=mesh_devices(4))
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


# x replicated (each device holds all of its 2 rows), the bands split over the 4
# devices (2 rows each): the result differs per device, and x's gradient sums
# every device's part. As one array: x tiled 4 times over the rows.
MIXED = (P("x"), P("x"), P("x"), P())


def _mixed_operands(rng):
    dl, d, du, _ = operands(rng, (8, 16))
    x = jnp.asarray(rng.standard_normal((2, 16)), jnp.float32)
    return [dl, d, du, x], np.tile(np.asarray(x), (4, 1))


def test_shard_map_with_a_replicated_operand_matches_the_oracle(rng):
    args, x_tiled = _mixed_operands(rng)
    out = _in_shard_map(matvec, MIXED, P("x"))(*args)
    assert_close(out, matvec_f64(*args[:3], x_tiled), VALUES)

    cotangent = jnp.asarray(rng.standard_normal((8, 16)), jnp.float32)

    def loss(*a):
        return jnp.sum(cotangent * _in_shard_map(matvec, MIXED, P("x"))(*a))

    got = jax.jit(jax.grad(loss, argnums=ALL))(*args)
    want = list(matvec_vjp_f64(*args[:3], x_tiled, cotangent))
    want[3] = np.reshape(want[3], (4, 2, 16)).sum(axis=0)  # the 4 tiles' parts
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, GRADIENTS)


def test_shard_map_refuses_a_replicated_out_spec_for_a_varying_result(rng):
    """The result varies over "x" with the bands: out_specs=P() would return
    one device's block as if it were all of it, and must be refused."""
    args, _ = _mixed_operands(rng)
    with pytest.raises(ValueError, match="out_specs"):
        _in_shard_map(matvec, MIXED, P())(*args)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: [a[0][:, :-1], *a[1:]], r"dl has shape \(3, 7\).*shape of x, \(3, 8\)"),
        (lambda a: [*a[:3], a[3][0]], r"dl has shape \(3, 8\).*shape of x, \(8,\)"),
        (lambda a: [a[0], a[1].astype(jnp.float64), *a[2:]], "d has dtype float64"),
        (lambda a: [x.astype(jnp.int32) for x in a], "needs floating-point operands, got int32"),
        (lambda a: [x[0, 0] for x in a], "x must have at least one axis"),
{%- if cookiecutter.lowering == "ffi" %}
        # A float the CPU handler cannot compute in: refused when traced, not
        # when the program runs.
        (
            lambda a: [x.astype(jnp.bfloat16) for x in a],
            "the CPU handler computes in float32, float64, got bfloat16",
        ),
{%- endif %}
    ],
    ids=["shape", "rank", "dtype", "integer", "scalar"{% if cookiecutter.lowering == "ffi" %}, "handler-dtype"{% endif %}],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bad_input_gets_the_primitives_error(rng, change, message, jit):
    args = change(operands(rng, (3, 8)))
    f = jax.jit(matvec) if jit else matvec
    with pytest.raises(TypeError, match=f"{NAME}: {message}"):
        f(*args)
