"""Softmax over the last axis, computed by C++ XLA FFI handlers.

    y = exp(x - max(x)) / sum(exp(x - max(x)))

The handlers' rows are csrc/softmax_kernels.h; rowwise.py registers them
with XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own). The handlers take
no attributes.
"""

from typing import TypeAlias

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def softmax(x: ArrayLike) -> jax.Array:
    """softmax over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. Differentiable (reverse mode), works
    under jit and vmap. An x whose leading axes are sharded is computed shard
    by shard, with no communication, gradient included; a sharded last axis
    is gathered first (each row must be whole on one device).
    """
    return rowwise.apply(_softmax, jnp.asarray(x))


@jax.custom_jvp
def _forward(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(y, m): the output and the maximum per row, which the backward reuses."""
    return rowwise.forward(x)


@jax.custom_jvp
def _backward(x: jax.Array, m: jax.Array, cotangent: jax.Array) -> jax.Array:
    return rowwise.backward(x, m, cotangent)


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(x: jax.Array, m: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: y * (g - sum(g * y)), y = softmax(x)
    from m. y does not depend on m (a shift that cancels), hence its stop_gradient."""
    r = jax.lax.stop_gradient(m)[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    e = jnp.exp(xc - r)
    y = e / jnp.sum(e, axis=-1, keepdims=True)
    return (y * (gc - jnp.sum(gc * y, axis=-1, keepdims=True))).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, m = _forward(x)
    # The y tangent is the backward formula with t as the cotangent (the
    # Jacobian of softmax is symmetric). m only shifts what the backward
    # computes, which cancels: its tangent is taken as 0.
    return (y, m), (_backward_formula(x, m, t), jnp.zeros_like(m))


@_backward.defjvp
def _backward_jvp(
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(_backward_formula, primals, tangents)
    return _backward(*primals), dx_t


@jax.custom_vjp
def _softmax(x: jax.Array) -> jax.Array:
    return _forward(x)[0]


# The residuals: x and the maximum per row.
Residuals: TypeAlias = tuple[jax.Array, jax.Array]


def _softmax_fwd(x: jax.Array) -> tuple[jax.Array, Residuals]:
    y, m = _forward(x)
    return y, (x, m)


def _softmax_bwd(residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array]:
    x, m = residuals
    return (_backward(x, m, cotangent),)


_softmax.defvjp(_softmax_fwd, _softmax_bwd)
