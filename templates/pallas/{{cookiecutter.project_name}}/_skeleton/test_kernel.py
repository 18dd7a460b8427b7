"""The kernel under the strict interpreter of tests/target.py, at the sizes
tests/op_spec.py declares (ragged: the last block hangs over the edge).

The conformance cells run the kernel in Pallas's plain interpreter, which
reads memory the kernel never wrote as whatever it held, and runs one grid
step at a time. The strict one (where the backend has it: TPU, Mosaic GPU)
poisons that memory with NaN, so a missing write or an unmasked edge fails
here, and raises on a data race (a TMA store of SMEM the threads have not
committed, a grid axis marked "parallel" whose steps write the same block).
"""

from functools import partial

import jax
import pytest

import target
from conformance import assert_grads, assert_outputs, cotangents_for, make_args, oracle, vjp_oracle
from op_spec import SPEC


@pytest.fixture
def strict():
    """The strict interpreter's settings; its state is reset after each test
    (a race raises inside the interpreter and may leave it dirty)."""
    yield target.STRICT
    target.reset_strict()


def test_strict_interpreter_finds_no_race_or_unwritten_memory(rng, strict):
    args = make_args(SPEC, rng)
    op = partial(SPEC.op, interpret=strict)
    assert_outputs(SPEC, target.run_strict(op, *args), oracle(SPEC, args))
    cotangents = cotangents_for(SPEC, args, rng)

    def gradients(*args):
        return jax.vjp(op, *args)[1](*cotangents)

    assert_grads(SPEC, target.run_strict(gradients, *args), vjp_oracle(SPEC, args, cotangents))
