"""Check the oracle itself against float64 NumPy: every other test trusts it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}_reference

from compare import assert_close
from oracle import VALUES, {{ cookiecutter.op_name }}_f64, {{ cookiecutter.op_name }}_vjp_f64

SHAPES = [(1, 1, 1), (3, 5, 7), (200, 300, 130), (256, 512, 128)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reference_matches_numpy(rng, shape, dtype, jit):
    m, k, n = shape
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    f = jax.jit({{ cookiecutter.op_name }}_reference) if jit else {{ cookiecutter.op_name }}_reference
    # The output is rounded to the input dtype once; the float32 accumulation
    # of k products adds a few float32 ulps.
    assert_close(f(a, b, bias), {{ cookiecutter.op_name }}_f64(a, b, bias), VALUES)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 5, 3)], ids=str)
def test_gradient_oracle_matches_finite_differences(rng, shape):
    """The hand-derived VJP against central differences of the float64 forward,
    along a random direction for each operand: <g, df(x; v)> = <vjp(g), v>."""
    m, k, n = shape
    args = [rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal(n)]
    g = rng.standard_normal((m, n))
    cotangents = {{ cookiecutter.op_name }}_vjp_f64(*args, g)
    for i, cotangent in enumerate(cotangents):
        v = rng.standard_normal(args[i].shape)
        h = 1e-5  # central differences: error ~h^2, rounding ~1e-16 / h
        plus = [x + h * v if j == i else x for j, x in enumerate(args)]
        minus = [x - h * v if j == i else x for j, x in enumerate(args)]
        slope = np.sum(g * ({{ cookiecutter.op_name }}_f64(*plus) - {{ cookiecutter.op_name }}_f64(*minus))) / (2 * h)
        # Not a comparison in ulps: the differences' own error is about h**2.
        np.testing.assert_allclose(np.sum(cotangent * v), slope, rtol=1e-8)
