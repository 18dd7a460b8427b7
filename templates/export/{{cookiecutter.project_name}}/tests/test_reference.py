{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Check the reference (the plain-JAX model) against the float64 oracle that
tests/op_spec.py declares, eager and jitted: every other test trusts it."""

import jax
import pytest

from {{ cookiecutter.package_name }} import artifact

from compare import assert_close
from op_spec import SPEC

METADATA = {"inputs": artifact.input_metadata()}
# Sizes of the dimension variables: the smallest, odd ones, a large batch.
SIZES = [{% if seq %}(1, 1), (3, 7), (33, 50){% else %}(1,), (3,), (257,){% endif %}]
REFERENCE = {"eager": SPEC.reference, "jit": jax.jit(SPEC.reference)}
# Jitted at every size; eager (op by op, each compiled anew for each shape)
# at one: what eager adds does not depend on the sizes.
CASES = [(sizes, "jit") for sizes in SIZES] + [(SIZES[1], "eager")]


@pytest.mark.parametrize("sizes, mode", CASES, ids=str)
def test_reference_matches_the_oracle(sizes, mode):
    if SPEC.oracle is None:
        pytest.skip("tests/op_spec.py declares no oracle (oracle=None): write one to check this")
    inputs = artifact.random_inputs(METADATA, {% if seq %}batch=sizes[0], seq=sizes[1]{% else %}batch=sizes[0]{% endif %}, seed=sum(sizes))
    want = SPEC.oracle(*inputs.values())
    assert_close(REFERENCE[mode](*inputs.values()), want, SPEC.tolerance)
