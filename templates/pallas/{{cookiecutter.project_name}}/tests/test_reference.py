"""Check the oracle itself against float64 NumPy: every other test trusts it."""

import jax
import jax.numpy as jnp
import pytest

from {{ cookiecutter.package_name }} import fused_matmul_reference

from oracle import assert_close, fused_matmul_f64, rtol_for

SHAPES = [(1, 1, 1), (3, 5, 7), (200, 300, 130), (256, 512, 128)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reference_matches_numpy(rng, shape, dtype, jit):
    m, k, n = shape
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    f = jax.jit(fused_matmul_reference) if jit else fused_matmul_reference
    # The output is rounded to the input dtype once; the float32 accumulation
    # of k products adds a few float32 ulps.
    assert_close(f(a, b, bias), fused_matmul_f64(a, b, bias), rtol_for(dtype))
