"""Check the reference against the float64 oracle that tests/op_spec.py
declares: a jitted reference can be wrong too (compiler bugs, precision), and
every other test trusts it. (With oracle=None the oracle is the reference
itself in float64, so this checks its float32 precision only.)"""

import jax
import pytest

from conformance import assert_outputs, make_args, oracle
from op_spec import SPEC


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reference_matches_the_float64_oracle(rng, dtype, jit):
    args = make_args(SPEC, rng, dtype)
    reference = jax.jit(SPEC.reference) if jit else SPEC.reference
    assert_outputs(SPEC, reference(*args), oracle(SPEC, args))
