{%- set op = cookiecutter.op_name -%}
"""Tests of this example model only (delete this file with the example): the
all-masked row, and the longest sequence its positional table allows."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import MAX_LEN, {{ [cookiecutter.op_name, "init_params"] | sort | join(", ") }}

from compare import assert_close
from op_spec import GRADIENTS, SPEC, VALUES


def test_all_masked_row_gives_bias_and_finite_gradient():
    params = init_params()
    x = np.ones((2, 5, 16), np.float32)
    mask = np.array([[False] * 5, [True, False, True, False, False]])
    # Not even an intermediate NaN (a softmax over a row of -inf is one):
    # debug_nans, which checks every eager operation, stays usable.
    with jax.debug_nans(True):
        logits = {{ op }}(params, x, mask)
    assert_close(logits[0], params["b_out"], VALUES)
    grad = jax.jit(jax.grad(lambda x: {{ op }}(params, x, mask).sum()))(x)
    assert np.isfinite(grad).all()
    assert_close(grad[0], np.zeros((5, 16)), GRADIENTS)


def test_the_longest_sequence_round_trips():
    # s = MAX_LEN, the largest length the constraint s <= MAX_LEN allows.
    inputs = artifact.random_inputs(SPEC.op.metadata, batch=3, seq=MAX_LEN, seed=0)
    assert_close(SPEC.op(*inputs.values()), SPEC.oracle(*inputs.values()), VALUES)


def test_constraint_violation():
    inputs = artifact.random_inputs(SPEC.op.metadata, batch=2, seq=MAX_LEN + 1, seed=0)
    with pytest.raises(ValueError, match=f"constraint 's <= {MAX_LEN}'"):
        SPEC.op(*inputs.values())


def test_without_the_constraint_export_fails():
    # What the constraint is for: slicing the positional table to s is only
    # valid when s <= MAX_LEN, and the exporter cannot know that by itself.
    b, s = export.symbolic_shape("b, s")
    specs = [jax.ShapeDtypeStruct((b, s, 16), jnp.float32), jax.ShapeDtypeStruct((b, s), jnp.bool_)]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        export.export(jax.jit(partial({{ op }}, init_params())))(*specs)
