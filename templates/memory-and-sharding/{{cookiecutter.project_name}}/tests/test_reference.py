"""Check the oracle itself against float64 NumPy (the example block's
forward and backward written by hand): a jitted reference can be wrong too,
and every other test trusts it. Specific to the example's block: delete it,
or write your block's own, when you change the block."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import reference_loss, reference_step

import oracle
from compare import assert_close
from op_spec import GRADIENTS, STEPS, VALUES
from oracle import make_problem

SIZES = [(1, 1, 1, 1), (2, 8, 4, 16), (4, 64, 64, 256)]  # (layers, batch, d, f)
# Jitted at every size and dtype; eager (op by op, slower) once, at a size
# with several blocks, since XLA can miscompile what runs right eagerly.
CASES = [(sizes, dtype, True) for sizes in SIZES for dtype in ("float32", "float64")]
CASES += [(SIZES[1], "float32", False)]


def numpy_loss_and_grads(params, x, y):
    """The loss 0.5 * sum((h_L - y)^2) / batch of the residual MLP
    h <- h + tanh(h @ w_in) @ w_out, and its gradient with respect to every
    weight, by the chain rule written out (no autodiff), in float64."""
    params = [(np.asarray(a, np.float64), np.asarray(b, np.float64)) for a, b in params]
    h = np.asarray(x, np.float64)
    saved = []
    for w_in, w_out in params:
        t = np.tanh(h @ w_in)
        saved.append((h, t))
        h = h + t @ w_out
    residual = h - np.asarray(y, np.float64)
    loss = 0.5 * np.sum(residual**2) / len(residual)
    g = residual / len(residual)  # d loss / d h_L
    grads = []
    for (w_in, w_out), (h, t) in zip(reversed(params), reversed(saved), strict=True):
        d_pre = (g @ w_out.T) * (1 - t**2)  # through tanh
        grads.append((h.T @ d_pre, t.T @ g))
        g = g + d_pre @ w_in.T  # the residual path plus the block's path
    return loss, grads[::-1]


def numpy_step(params, momentum, x, y, learning_rate=0.05, beta=0.9):
    """One SGD-with-momentum step in float64: (params, momentum, loss)."""
    loss, grads = numpy_loss_and_grads(params, x, y)
    momentum = [
        tuple(beta * np.asarray(m, np.float64) + g for m, g in zip(ms, gs, strict=True))
        for ms, gs in zip(momentum, grads, strict=True)
    ]
    params = [
        tuple(np.asarray(w, np.float64) - learning_rate * m for w, m in zip(ws, ms, strict=True))
        for ws, ms in zip(params, momentum, strict=True)
    ]
    return params, momentum, loss


def as_jax(tree, dtype):
    """tree as jax.Arrays where the reference runs in that dtype: float32 on
    the default device, as the tests compare the sharded step with it;
    float64 on the CPU, where tests/oracle.py runs it (the oracle is what
    the float64 cases check; a TPU would emulate float64, and slowly)."""
    if dtype == "float64":
        return jax.device_put(tree, jax.devices("cpu")[0])
    return jax.tree.map(jnp.asarray, tree)


@pytest.mark.parametrize(("sizes", "dtype", "jit"), CASES, ids=str)
def test_reference_loss_and_gradient_match_numpy(rng, sizes, dtype, jit):
    layers, batch, d, f = sizes
    params, x, y = make_problem(rng, layers, batch, d, hidden=f, dtype=dtype)
    value_and_grad = jax.value_and_grad(reference_loss)
    if jit:
        value_and_grad = jax.jit(value_and_grad)
    loss, grads = value_and_grad(*as_jax((params, x, y), dtype))
    want_loss, want_grads = numpy_loss_and_grads(params, x, y)
    assert loss.dtype == dtype
    assert_close(loss, want_loss, VALUES)
    assert_close(
        # A jax.Array: assert_close reads the platform it was computed on.
        jnp.concatenate([jnp.ravel(g) for g in jax.tree.leaves(grads)]),
        np.concatenate([np.ravel(g) for g in jax.tree.leaves(want_grads)]),
        GRADIENTS,
    )


def test_the_float64_oracle_runs_on_the_cpu(rng):
    # Its inputs are committed to the CPU, so that jax.jit runs it there
    # whatever the default device (on a TPU host, the TPU, whose float64 is
    # emulated); and what it returns is NumPy, on no device.
    params, x, y = make_problem(rng, 1, 2, 4, hidden=8)
    cpu = jax.devices("cpu")[0]
    with jax.default_device(jax.devices("cpu")[-1]):  # another default device
        for leaf in jax.tree.leaves(oracle._f64((params, x, y))):
            assert leaf.dtype == np.float64 and leaf.committed and leaf.devices() == {cpu}
        loss, grads = oracle.loss_and_grads_f64(params, x, y)
    assert all(isinstance(a, np.ndarray) for a in jax.tree.leaves((loss, grads)))
    assert_close(loss, numpy_loss_and_grads(params, x, y)[0], VALUES)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reference_step_matches_numpy(rng, dtype):
    params, x, y = make_problem(rng, dtype=dtype)
    momentum = jax.tree.map(lambda w: rng.standard_normal(w.shape).astype(dtype), params)
    got = jax.jit(reference_step)(*as_jax((params, momentum, x, y), dtype))
    want = numpy_step(params, momentum, x, y)
    for got_leaf, want_leaf in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert_close(got_leaf, want_leaf, STEPS)
