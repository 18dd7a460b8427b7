{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Check the oracle (the plain-JAX model) against float64 NumPy, eager and
jitted: every other test trusts it."""

import jax
{%- if seq %}
import numpy as np
{%- endif %}
import pytest

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import init_params, predict

from compare import assert_close
from oracle import {% if seq %}GRADIENTS, {% endif %}VALUES, predict_f64

METADATA = {"inputs": artifact.input_metadata()}
SIZES = [{% if seq %}(1, 1), (3, 7), (8, 128), (33, 50){% else %}(1,), (3,), (257,){% endif %}]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_reference_matches_numpy(sizes, jit):
    params = init_params()
    inputs = artifact.random_inputs(METADATA, {% if seq %}batch=sizes[0], seq=sizes[1]{% else %}batch=sizes[0]{% endif %}, seed=sum(sizes))
    f = jax.jit(predict) if jit else predict
    # float32 matmuls and tanh against float64: a few ulps per term.
    want = predict_f64(params, *inputs.values())
    assert_close(f(params, *inputs.values()), want, VALUES)
{% if seq %}

def test_all_masked_row_gives_bias_and_finite_gradient():
    params = init_params()
    x = np.ones((2, 5, 16), np.float32)
    mask = np.array([[False] * 5, [True, False, True, False, False]])
    # Not even an intermediate NaN (a softmax over a row of -inf is one):
    # debug_nans, which checks every eager operation, stays usable.
    with jax.debug_nans(True):
        logits = predict(params, x, mask)
    assert_close(logits[0], params["b_out"], VALUES)
    grad = jax.jit(jax.grad(lambda x: predict(params, x, mask).sum()))(x)
    assert np.isfinite(grad).all()
    assert_close(grad[0], np.zeros((5, 16)), GRADIENTS)
{% endif -%}
