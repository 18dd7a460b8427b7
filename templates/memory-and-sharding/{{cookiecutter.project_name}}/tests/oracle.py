"""The float64 oracle, the reference model (reference_loss, reference_step)
run in float64, and random problems shaped by the block's WEIGHTS. Your
tolerances, in ulps, are in tests/op_spec.py."""

import jax
import numpy as np

from {{ cookiecutter.package_name }} import reference_loss, reference_step
from {{ cookiecutter.package_name }}.sharded_step import WEIGHTS

# The problem tests/test_multiprocess.py runs across two processes: small,
# since what it checks is that the step runs across them.
PROCESSES_PROBLEM = {"layers": 2, "batch": 16, "d": 16}
# Every named axis of a weight but d is a hidden size, this many times d.
HIDDEN = 4


def make_problem(rng, layers=4, batch=64, d=64, hidden=None, dtype="float32"):
    """`layers` blocks of weights (matrices scaled by their fan-in, so that
    every block changes h by a similar amount), inputs and targets (batch, d):
    NumPy arrays of `dtype`. Every axis but d is `hidden` long (HIDDEN * d)."""
    hidden = HIDDEN * d if hidden is None else hidden

    def weight(axes):
        shape = tuple(d if a == "d" else hidden for a in axes)
        w = rng.standard_normal(shape)
        return (w / np.sqrt(shape[0]) if len(shape) > 1 else w).astype(dtype)

    params = [tuple(weight(axes) for axes in WEIGHTS.values()) for _ in range(layers)]
    x = rng.standard_normal((batch, d)).astype(dtype)
    y = rng.standard_normal((batch, d)).astype(dtype)
    return params, x, y


def _f64(tree):
    """tree in float64, committed to the CPU: jax.jit then runs the oracle
    there, whatever the default device. An accelerator is asked for no
    float64: a TPU emulates it (tens to hundreds of ulps off IEEE float64)."""
    cpu = jax.devices("cpu")[0]
    return jax.tree.map(lambda a: jax.device_put(np.asarray(a, np.float64), cpu), tree)


def _numpy(tree):
    return jax.tree.map(np.asarray, tree)


_loss_and_grads = jax.jit(jax.value_and_grad(reference_loss))
_step = jax.jit(reference_step)


def loss_and_grads_f64(params, x, y):
    """reference_loss and its gradient with respect to every weight, in
    float64 (the tests enable jax_enable_x64)."""
    return _numpy(_loss_and_grads(*_f64((params, x, y))))


def step_f64(params, momentum, x, y, learning_rate=0.05, beta=0.9):
    """One SGD-with-momentum step of reference_step in float64: (params,
    momentum, loss)."""
    return _numpy(_step(*_f64((params, momentum, x, y)), learning_rate, beta))
