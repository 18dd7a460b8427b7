"""What is specific to RMS normalisation, beyond test_handlers.py: eps,
magnitudes whose squares overflow float32, NaN, and the gradient against a
hand-written float64 formula. Optional: delete it when you make the starter
your own op (README.md, "Adapt it")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

from compare import assert_close
from op_spec import GRADIENTS, VALUES, {{ cookiecutter.op_name }}_f64


def {{ cookiecutter.op_name }}_vjp_f64(x, cotangent, eps=1e-6):
    """Gradient of sum(cotangent * {{ cookiecutter.op_name }}(x)) with respect to x, in float64.

    With r = 1 / sqrt(mean(x**2) + eps) per row and n the row length:
    dx = r * g - r**3 * mean(g * x) * x.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(cotangent, dtype=np.float64)
    r = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return r * g - r**3 * np.mean(g * x, axis=-1, keepdims=True) * x


def data(rng, shape, dtype, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), dtype)


@pytest.mark.parametrize("scale", [1e-4, 1e3, 1e18])
def test_extreme_magnitudes_float32(rng, scale):
    x = data(rng, (6, 40), "float32", scale)
    assert_close({{ cookiecutter.op_name }}(x), {{ cookiecutter.op_name }}_f64(x), VALUES)


def test_handler_sums_in_double_where_float32_overflows(rng):
    # Squares of 1e20 overflow float32: the reference divides by inf and
    # returns zeros; the handler accumulates in double and stays right.
    x = data(rng, (4, 16), "float32", 1e20)
    assert not np.any({{ cookiecutter.op_name }}_reference(x)), "expected the float32 reference to overflow"
    assert_close({{ cookiecutter.op_name }}(x), {{ cookiecutter.op_name }}_f64(x), VALUES)


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.5])
def test_eps(rng, eps):
    x = data(rng, (5, 9), "float64", 1e-2)
    assert_close({{ cookiecutter.op_name }}(x, eps=eps), {{ cookiecutter.op_name }}_f64(x, eps=eps), VALUES)
    assert_close(jax.jit(lambda x: {{ cookiecutter.op_name }}(x, eps=eps))(x), {{ cookiecutter.op_name }}_f64(x, eps=eps), VALUES)


def test_nan_stays_in_its_row():
    x = jnp.array([[1.0, jnp.nan, 2.0], [3.0, 4.0, 5.0]])
    y = {{ cookiecutter.op_name }}(x)
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()


def test_gradient_matches_numpy_at_4096_rows(rng):
    x, cotangent = data(rng, (4096, 64), "float32"), data(rng, (4096, 64), "float32")
    got = jax.jit(jax.grad(lambda x: jnp.sum(cotangent * {{ cookiecutter.op_name }}(x))))(x)
    assert_close(got, {{ cookiecutter.op_name }}_vjp_f64(x, cotangent), GRADIENTS)


def test_bad_eps_raises():
    with pytest.raises(jax.errors.JaxRuntimeError, match="eps must be finite and >= 0"):
        {{ cookiecutter.op_name }}(jnp.ones((2, 3)), eps=-1.0)
    with pytest.raises(TypeError, match="eps must be a Python number"):
        jax.jit({{ cookiecutter.op_name }})(jnp.ones((2, 3)), jnp.float32(1e-6))


def test_reference_eps_dominates_tiny_rows():
    x = np.full((2, 4), 1e-5)
    assert_close({{ cookiecutter.op_name }}_reference(x, eps=1e-2), {{ cookiecutter.op_name }}_f64(x, eps=1e-2), VALUES)
