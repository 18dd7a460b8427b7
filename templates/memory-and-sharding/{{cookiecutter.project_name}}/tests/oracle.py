"""Independent float64 NumPy forward and hand-written backward of the MLP's
loss."""

import numpy as np

from compare import Ulps

# How far the MLP may be from this oracle, in ulps (tests/compare.py).
# The loss is a sum of squares (no cancellation) and a block's output h +
# tanh(h @ w_in) @ w_out adds a correction to h: a few ulps of each value
# (measured at most 2.3, float32).
VALUES = Ulps(at_value=4)
# A weight's gradient sums over the batch and the hidden features, and its
# terms cancel: the rounding is on the scale of the largest entry, not of each.
# Measured at most 7 ulps of the largest entry (float32); 16.
GRADIENTS = Ulps(at_value=0, at_scale=16)
# A step's new weights and momenta, w - learning_rate * m: the gradient's
# rounding, scaled down by the learning rate, on weights of the largest
# entry's size. Measured at most 3.2 ulps of the largest entry (float32); 8.
STEPS = Ulps(at_value=0, at_scale=8)


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


def make_problem(rng, layers=4, batch=64, d=64, f=256, dtype="float32"):
    """Weights scaled so that every block changes h by a similar amount,
    inputs and targets: NumPy arrays of `dtype`."""
    params = [
        (
            (rng.standard_normal((d, f)) / np.sqrt(d)).astype(dtype),
            (rng.standard_normal((f, d)) / np.sqrt(f)).astype(dtype),
        )
        for _ in range(layers)
    ]
    x = rng.standard_normal((batch, d)).astype(dtype)
    y = rng.standard_normal((batch, d)).astype(dtype)
    return params, x, y


def loss_and_grads_f64(params, x, y):
    """The loss 0.5 * sum((h_L - y)^2) / batch of the residual MLP
    h <- h + tanh(h @ w_in) @ w_out, and its gradient with respect to every
    weight, by the chain rule written out (no autodiff)."""
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


def step_f64(params, momentum, x, y, learning_rate=0.05, beta=0.9):
    """One SGD-with-momentum step in float64: (params, momentum, loss)."""
    loss, grads = loss_and_grads_f64(params, x, y)
    new_momentum, new_params = [], []
    for (w_in, w_out), (m_in, m_out), (g_in, g_out) in zip(params, momentum, grads, strict=True):
        m_in, m_out = (
            beta * np.asarray(m_in, np.float64) + g_in,
            beta * np.asarray(m_out, np.float64) + g_out,
        )
        new_momentum.append((m_in, m_out))
        new_params.append((w_in - learning_rate * m_in, w_out - learning_rate * m_out))
    return new_params, new_momentum, loss
