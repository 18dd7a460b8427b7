"""Rung 2, custom VJP: the same op, with a backward rule written by hand.

What it buys: autodiff of rung 1 saves whatever its backward needs (x / rms, the squares...)
and differentiates the division and the square root step by step. Here the forward saves one
number per row, the inverse RMS r, besides the inputs it already holds, and the backward is
the closed form (oracle.py derives it):

    x_hat = x * r,  g = dy * w,  dx = r * (g - x_hat * mean(g * x_hat)),  dw = sum_rows dy * x_hat

What it costs: forward-mode autodiff (jax.jvp, jacfwd) is gone; a custom_vjp has none.
"""

import jax
import jax.numpy as jnp

EPS = 1e-6


def _forward(x, w):
    r = 1.0 / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)  # (..., 1)
    return x * r * w, r


@jax.custom_vjp
def rms_norm(x, w):
    """x: (..., d) float32, w: (d,) float32 -> (..., d). Reverse-mode differentiable."""
    return _forward(x, w)[0]


def _fwd(x, w):
    y, r = _forward(x, w)
    return y, (x, w, r)  # x and w are alive anyway: r is the only new memory


def _bwd(residuals, dy):
    x, w, r = residuals
    x_hat = x * r
    g = dy * w
    dx = r * (g - x_hat * jnp.mean(g * x_hat, axis=-1, keepdims=True))
    dw = jnp.sum((dy * x_hat).reshape(-1, w.shape[0]), axis=0)
    return dx, dw


rms_norm.defvjp(_fwd, _bwd)
