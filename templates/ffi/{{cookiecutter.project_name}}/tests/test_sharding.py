"""Sharding on 8 simulated CPU devices (see conftest.py): a row-sharded input
is normalised shard by shard, and the compiled program has no all-gather."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from {{ cookiecutter.package_name }} import rms_norm

from oracle import assert_close, rms_norm_f64, rms_norm_vjp_f64, rtol_for

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")


def compiled_text(f, *args):
    return jax.jit(f).lower(*args).compile().as_text()


def assert_no_collectives(text):
    found = [op for op in COLLECTIVES if op in text]
    assert not found, f"the compiled program communicates: {found}"


@pytest.fixture(scope="module")
def mesh():
    # jax.make_mesh gives explicit axes: every array's sharding is part of its
    # type, so rms_norm sees it while tracing.
    cpus = jax.devices("cpu")
    assert len(cpus) == 8, "conftest.py should have made 8 CPU devices"
    return jax.make_mesh((8,), ("rows",), axis_types=(AxisType.Explicit,), devices=cpus)


def rows_sharded(mesh, x, spec=None):
    return jax.device_put(x, NamedSharding(mesh, P("rows") if spec is None else spec))


@pytest.mark.parametrize("shape", [(64, 32), (8, 4, 16)], ids=str)
def test_row_sharded_forward_has_no_all_gather(rng, mesh, shape):
    x = rows_sharded(mesh, jnp.asarray(rng.standard_normal(shape), jnp.float32))
    assert_no_collectives(compiled_text(rms_norm, x))
    y = jax.jit(rms_norm)(x)
    assert y.sharding.spec[0] == "rows"
    assert_close(y, rms_norm_f64(x), rtol_for("float32"))


def test_row_sharded_gradient_has_no_all_gather(rng, mesh):
    x = rows_sharded(mesh, jnp.asarray(rng.standard_normal((64, 32)), jnp.float32))
    cotangent = rows_sharded(mesh, jnp.asarray(rng.standard_normal((64, 32)), jnp.float32))

    def grad(x, cotangent):
        return jax.grad(lambda x: jnp.sum(cotangent * rms_norm(x)))(x)

    assert_no_collectives(compiled_text(grad, x, cotangent))
    got = jax.jit(grad)(x, cotangent)
    assert got.sharding.spec[0] == "rows"
    assert_close(got, rms_norm_vjp_f64(x, cotangent), 10 * rtol_for("float32"))


def test_a_sharded_last_axis_is_gathered_first(rng):
    # Each row must be whole on one device, so a sharded last axis costs one
    # all-to-all or all-gather; the result is still right.
    mesh2 = jax.make_mesh(
        (2, 4), ("rows", "cols"), axis_types=(AxisType.Explicit,) * 2, devices=jax.devices("cpu")
    )
    x = jnp.asarray(rng.standard_normal((8, 16)), jnp.float32)
    x = rows_sharded(mesh2, x, P("rows", "cols"))
    assert_close(jax.jit(rms_norm)(x), rms_norm_f64(x), rtol_for("float32"))


def test_auto_axes_need_an_explicit_shard_map(rng):
    # With auto axes the sharding is not known while tracing: XLA would gather
    # x onto every device before the custom call. Wrapping the call in
    # shard_map yourself keeps it local.
    mesh = jax.make_mesh((8,), ("rows",), axis_types=(AxisType.Auto,), devices=jax.devices("cpu"))
    x = rows_sharded(mesh, jnp.asarray(rng.standard_normal((64, 32)), jnp.float32))
    assert "all-gather" in compiled_text(rms_norm, x)
    local = jax.shard_map(rms_norm, mesh=mesh, in_specs=P("rows"), out_specs=P("rows"))
    assert_no_collectives(compiled_text(local, x))
    assert_close(jax.jit(local)(x), rms_norm_f64(x), rtol_for("float32"))
    assert np.isfinite(jax.jit(local)(x)).all()
