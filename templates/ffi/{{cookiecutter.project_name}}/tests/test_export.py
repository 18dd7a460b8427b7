"""jax.export of a function that calls the handler: it exports only with the
custom-call safety check disabled, and round-trips through serialization in
a process where the target is registered (this one). On several devices, the
function to export is wrapped in for_export (see test_export_for_a_mesh).

An artifact runs only on the platforms it was exported for, and export's
default is the default backend's (CUDA on a GPU machine), while these tests
keep their arrays on the CPU (conftest.py). So each test names its platforms
(EXPORT_PLATFORMS{% if cookiecutter.cuda == "yes" %}: the CPU and CUDA, which lowers on any machine{% endif %}) and calls
the artifact on a device of each of them that this machine has (DEVICES)."""

import re
from collections import Counter

import jax
import jax.numpy as jnp
import pytest
from jax import export
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from {{ cookiecutter.package_name }} import BACKWARD, FORWARD{% if cookiecutter.cuda == "yes" %}, cuda_available{% endif %}, for_export

from compare import assert_close
from conformance import oracle, vjp_oracle
from op_spec import SPEC

op = SPEC.op
VALUES, GRADIENTS = SPEC.tolerance, SPEC.gradient_tolerance

# The platforms the handlers exist for, as jax.export names them ("cuda",
# where a JAX device says "gpu").
EXPORT_PLATFORMS = ({% if cookiecutter.cuda == "yes" %}"cpu", "cuda"{% else %}"cpu",{% endif %})
EXPORT_NAME = {"gpu": "cuda"}


def export_platform(device):
    """The name jax.export gives a device's platform."""
    return EXPORT_NAME.get(device.platform, device.platform)


def devices():
    """One device per platform in EXPORT_PLATFORMS that this machine can run
    the handler on: the CPU always{% if cookiecutter.cuda == "yes" %}; a GPU where there is one and the
    extension was built with its CUDA handler{% endif %}."""
    found = [jax.devices("cpu")[0]]
{%- if cookiecutter.cuda == "yes" %}
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend
        gpus = []
    if gpus and cuda_available():
        found.append(gpus[0])
{%- endif %}
    return found


DEVICES = devices()
on_each_device = pytest.mark.parametrize(
    "device", DEVICES, ids=[export_platform(d) for d in DEVICES]
)


def model(x):
    return jnp.tanh(op(x))


def test_export_refuses_the_custom_call_by_default(rng):
    x = jnp.asarray(rng.standard_normal((4, 8)), jnp.float32)
    with pytest.raises(ValueError, match="custom call"):
        export.export(jax.jit(model), platforms=EXPORT_PLATFORMS)(x)


def test_each_device_is_of_an_exported_platform():
    assert {export_platform(d) for d in DEVICES} <= set(EXPORT_PLATFORMS)


@on_each_device
def test_export_round_trip(rng, device):
    x = jax.device_put(jnp.asarray(rng.standard_normal((4, 8)), jnp.float32), device)
    # Exported from the shape alone, and called on x where it lies.
    exported = export.export(
        jax.jit(model),
        platforms=EXPORT_PLATFORMS,
        disabled_checks=[export.DisabledSafetyCheck.custom_call(FORWARD)],
    )(jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert exported.platforms == EXPORT_PLATFORMS
    assert FORWARD in exported.mlir_module()
    restored = export.deserialize(exported.serialize())
    got = restored.call(x)
    assert got.devices() == {device}
    assert_close(got, jax.jit(model)(x), VALUES)  # the same program


@on_each_device
def test_export_with_its_gradient(rng, device):
    # vjp_order=1 serializes the backward too, so both targets must be allowed.
    x = jax.device_put(jnp.asarray(rng.standard_normal((4, 8)), jnp.float64), device)
    cotangent = jax.device_put(jnp.asarray(rng.standard_normal((4, 8)), jnp.float64), device)
    checks = [export.DisabledSafetyCheck.custom_call(name) for name in (FORWARD, BACKWARD)]
    # Exported from the shape alone: the artifact records no device (from x
    # itself, committed to its device, serialize(vjp_order=1) fails on
    # JAX 0.12 with "got an empty NamedSharding").
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    exported = export.export(jax.jit(op), platforms=EXPORT_PLATFORMS, disabled_checks=checks)(spec)
    restored = export.deserialize(exported.serialize(vjp_order=1))
    got = jax.grad(lambda x: jnp.sum(cotangent * restored.call(x)))(x)
    assert got.devices() == {device}
    assert_close(got, vjp_oracle(SPEC, [x], [cotangent])[0], GRADIENTS)


@pytest.mark.parametrize("axis_type", [AxisType.Auto, AxisType.Explicit], ids=["auto", "explicit"])
def test_export_for_a_mesh(rng, axis_type):
    # On several devices the handler calls are custom_partitioning's, whose
    # Python callbacks jax.export cannot serialize; for_export traces them as
    # plain FFI calls. Exported from x itself: the artifact is for 4 devices.
    mesh = jax.make_mesh((4,), ("rows",), axis_types=(axis_type,), devices=jax.devices("cpu")[:4])
    x, cotangent = (
        jax.device_put(jnp.asarray(rng.standard_normal((16, 8)), jnp.float32), sharding)
        for sharding in [NamedSharding(mesh, P("rows"))] * 2
    )
    checks = [export.DisabledSafetyCheck.custom_call(name) for name in (FORWARD, BACKWARD)]
    with pytest.raises(NotImplementedError, match="host_callbacks"):
        export.export(jax.jit(op), platforms=EXPORT_PLATFORMS, disabled_checks=checks)(x)

    def grad(x, cotangent):
        return jax.grad(lambda x: jnp.sum(cotangent * op(x)))(x)

    for f, args, want, ulps in [
        (op, (x,), oracle(SPEC, [x])[0], VALUES),
        (grad, (x, cotangent), vjp_oracle(SPEC, [x], [cotangent])[0], GRADIENTS),
    ]:
        exported = export.export(
            jax.jit(for_export(f)), platforms=EXPORT_PLATFORMS, disabled_checks=checks
        )(*args)
        assert exported.nr_devices == 4
        restored = export.deserialize(exported.serialize())
        assert_close(restored.call(*args), want, ulps)


# An instruction of the compiled program is "<shape> <opcode>(<operands>)";
# async collectives end in -start.
COLLECTIVE = re.compile(
    r"\s(all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)(?:-start)?\("
)


def jitted_model_and_gradient():
    """A model and its gradient under jax.jit, new Python functions each call:
    jit keeps its caches per function, so each call's pair starts uncached."""

    @jax.jit
    def model(x):
        return jnp.tanh(op(x))

    @jax.jit
    def grad(x, cotangent):
        return jax.grad(lambda x: jnp.sum(cotangent * model(x)))(x)

    return model, grad


@pytest.mark.parametrize("axis_type", [AxisType.Auto, AxisType.Explicit], ids=["auto", "explicit"])
def test_export_and_runs_of_one_jitted_model_in_either_order(rng, axis_type):
    # A process that both runs a jitted model and exports it: for_export's
    # choice must be part of what jit caches on. Were it ambient state, the
    # second of the two would reuse the first's trace: run first, the export
    # would meet custom_partitioning's callbacks (NotImplementedError); export
    # first, the runs would call the handlers unpartitioned and gather their
    # operands onto every device.
    mesh = jax.make_mesh((4,), ("rows",), axis_types=(axis_type,), devices=jax.devices("cpu")[:4])
    x, cotangent = (
        jax.device_put(jnp.asarray(rng.standard_normal((16, 8)), jnp.float32), sharding)
        for sharding in [NamedSharding(mesh, P("rows"))] * 2
    )
    checks = [export.DisabledSafetyCheck.custom_call(name) for name in (FORWARD, BACKWARD)]

    def run(f, args):
        jax.block_until_ready(f(*args))
        return Counter(COLLECTIVE.findall(f.lower(*args).compile().as_text()))

    def export_(f, args):
        exported = export.export(
            jax.jit(for_export(f)), platforms=EXPORT_PLATFORMS, disabled_checks=checks
        )(*args)
        assert exported.nr_devices == 4

    run_first, export_first = jitted_model_and_gradient(), jitted_model_and_gradient()
    for which, args in [(0, (x,)), (1, (x, cotangent))]:
        # Run, then export: the export must not reuse the run's trace.
        after_nothing = run(run_first[which], args)
        export_(run_first[which], args)
        # Export, then run: the run must communicate as it does unexported.
        export_(export_first[which], args)
        assert run(export_first[which], args) == after_nothing
