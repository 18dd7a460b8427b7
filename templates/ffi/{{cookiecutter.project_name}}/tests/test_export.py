"""jax.export of a function that calls the handler: it exports only with the
custom-call safety check disabled, and round-trips through serialization in
a process where the target is registered (this one)."""

import jax
import jax.numpy as jnp
import pytest
from jax import export

from {{ cookiecutter.package_name }} import BACKWARD, FORWARD

from compare import assert_close
from conformance import vjp_oracle
from op_spec import SPEC

op = SPEC.op
VALUES, GRADIENTS = SPEC.tolerance, SPEC.gradient_tolerance


def model(x):
    return jnp.tanh(op(x))


def test_export_refuses_the_custom_call_by_default(rng):
    x = jnp.asarray(rng.standard_normal((4, 8)), jnp.float32)
    with pytest.raises(ValueError, match="custom call"):
        export.export(jax.jit(model))(x)


def test_export_round_trip(rng):
    x = jnp.asarray(rng.standard_normal((4, 8)), jnp.float32)
    exported = export.export(
        jax.jit(model), disabled_checks=[export.DisabledSafetyCheck.custom_call(FORWARD)]
    )(x)
    assert FORWARD in exported.mlir_module()
    restored = export.deserialize(exported.serialize())
    assert_close(restored.call(x), jax.jit(model)(x), VALUES)  # the same program


def test_export_with_its_gradient(rng):
    # vjp_order=1 serializes the backward too, so both targets must be allowed.
    x = jnp.asarray(rng.standard_normal((4, 8)), jnp.float64)
    cotangent = jnp.asarray(rng.standard_normal((4, 8)), jnp.float64)
    checks = [export.DisabledSafetyCheck.custom_call(name) for name in (FORWARD, BACKWARD)]
    exported = export.export(jax.jit(op), disabled_checks=checks)(x)
    restored = export.deserialize(exported.serialize(vjp_order=1))
    got = jax.grad(lambda x: jnp.sum(cotangent * restored.call(x)))(x)
    assert_close(got, vjp_oracle(SPEC, [x], [cotangent])[0], GRADIENTS)
