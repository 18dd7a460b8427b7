"""Check the reference itself against the float64 oracle of op_spec.py: a
jitted reference can be wrong too (compiler bugs, precision), and every other
test trusts it. Its jitted gradient is held to its own float64 autodiff."""

import jax
import jax.numpy as jnp
import pytest

from compare import assert_close
from conformance import oracle, vjp_oracle
from op_spec import SPEC

reference = SPEC.reference

# Ranks 1 to 4, size-1 axes, and 4096+ rows (XLA:CPU in jaxlib 0.11.1 to
# 0.12.0.1 miscompiled jit(grad) of RMS normalisation's rsqrt form from 4096
# rows on).
SHAPES = [(1,), (7,), (1, 1), (3, 1), (5, 33), (4096, 8), (2, 1, 6, 5), (64, 512)]
DTYPES = ["float32", "float64", "bfloat16"]


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_reference_values_match_numpy(rng, shape, dtype, jit):
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    f = jax.jit(reference) if jit else reference
    assert_close(f(x), oracle(SPEC, [x])[0], SPEC.tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [s for s in SHAPES if s[-1] > 1], ids=shape_id)
def test_reference_gradient_matches_float64(rng, shape, dtype):
    # Rows of length 1 are left out (see test_handlers.py).
    x = jnp.asarray(rng.standard_normal(shape), dtype)
    cotangent = jnp.asarray(rng.standard_normal(shape), dtype)

    def loss(x):
        return jnp.sum(cotangent * reference(x))

    got = jax.jit(jax.grad(loss))(x)
    assert_close(got, vjp_oracle(SPEC, [x], [cotangent])[0], SPEC.gradient_tolerance)
