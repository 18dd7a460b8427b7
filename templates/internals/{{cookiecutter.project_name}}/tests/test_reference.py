"""Check the plain-JAX reference itself: every other test trusts it (the
conformance matrix differentiates it for its gradient oracle), and a jitted
reference can be wrong too (compiler bugs, precision). It works from the
declaration in tests/op_spec.py, so it needs no edits for an op of your own."""

import jax
import numpy as np
import pytest
from jax.test_util import check_grads

from compare import assert_close
from conformance import make_args, oracle
from op_spec import SPEC

# Where op_spec.py declares no oracle (oracle=None), the reference in float64
# is the oracle: then only the reference in float32 is checked against it,
# which still catches a formula that loses precision.
DTYPES = ["float32"] if SPEC.oracle is None else ["float32", "float64"]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_values_match_the_oracle(rng, dtype, jit):
    """Against the declared float64 NumPy oracle, eager and jitted."""
    args = make_args(SPEC, rng, dtype)
    f = jax.jit(SPEC.reference) if jit else SPEC.reference
    got = f(*args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for g, w in zip(got, oracle(SPEC, args), strict=True):
        assert g.dtype == np.dtype(dtype)
        assert_close(g, w, SPEC.tolerance)


def test_reference_gradients_match_finite_differences(rng):
    """JAX's reverse-mode autodiff of the reference (the gradient oracle of
    every cell) against finite differences, in float64."""
    args = make_args(SPEC, rng, "float64")
    diff = [i for i, a in enumerate(SPEC.args) if a.differentiable]

    def partial(*picked):
        full = list(args)
        for i, a in zip(diff, picked, strict=True):
            full[i] = a
        return SPEC.reference(*full)

    check_grads(partial, [args[i] for i in diff], order=1, modes=["rev"])
