"""Check the oracle itself against float64 NumPy (a forward and a backward
written by hand): a jitted reference can be wrong too, and every other test
trusts it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import reference_loss, reference_step

from compare import assert_close
from oracle import GRADIENTS, STEPS, VALUES, loss_and_grads_f64, make_problem, step_f64

SIZES = [(1, 1, 1, 1), (2, 8, 4, 16), (4, 64, 64, 256)]  # (layers, batch, d, f)
# Jitted at every size and dtype; eager (op by op, slower) once, since XLA can
# miscompile what runs right eagerly.
CASES = [(sizes, dtype, True) for sizes in SIZES for dtype in ("float32", "float64")]
CASES += [(SIZES[-1], "float32", False)]


def as_jax(tree):
    return jax.tree.map(jnp.asarray, tree)


@pytest.mark.parametrize(("sizes", "dtype", "jit"), CASES, ids=str)
def test_reference_loss_and_gradient_match_numpy(rng, sizes, dtype, jit):
    layers, batch, d, f = sizes
    params, x, y = make_problem(rng, layers, batch, d, f, dtype)
    value_and_grad = jax.value_and_grad(reference_loss)
    if jit:
        value_and_grad = jax.jit(value_and_grad)
    loss, grads = value_and_grad(as_jax(params), jnp.asarray(x), jnp.asarray(y))
    want_loss, want_grads = loss_and_grads_f64(params, x, y)
    assert loss.dtype == dtype
    assert_close(loss, want_loss, VALUES)
    assert_close(
        np.concatenate([np.ravel(g) for g in jax.tree.leaves(grads)]),
        np.concatenate([np.ravel(g) for g in jax.tree.leaves(want_grads)]),
        GRADIENTS,
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reference_step_matches_numpy(rng, dtype):
    params, x, y = make_problem(rng, dtype=dtype)
    momentum = jax.tree.map(lambda w: rng.standard_normal(w.shape).astype(dtype), params)
    got = jax.jit(reference_step)(as_jax(params), as_jax(momentum), jnp.asarray(x), jnp.asarray(y))
    want = step_f64(params, momentum, x, y)
    for got_leaf, want_leaf in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert_close(got_leaf, want_leaf, STEPS)
