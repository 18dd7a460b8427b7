"""SiLU, x * sigmoid(x) element by element, computed by C++ XLA FFI handlers.

The handlers' rows are csrc/silu_kernels.h; rowwise.py registers them with
XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own). The handlers take
no attributes, and need no residual (it is 0).
"""

from typing import TypeAlias

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def silu(x: ArrayLike) -> jax.Array:
    """x * sigmoid(x), element by element, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, a last axis of length >= 1.
    Differentiable (reverse mode), works under jit and vmap. A sharded x is
    computed shard by shard, whichever axes are split, with no
    communication, gradient included, and the result is sharded like x.
    """
    return rowwise.apply(_silu, jnp.asarray(x))


@jax.custom_jvp
def _forward(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(y, residual): the output, and the residual (0: the backward needs only x)."""
    return rowwise.forward(x)


@jax.custom_jvp
def _backward(x: jax.Array, residual: jax.Array, cotangent: jax.Array) -> jax.Array:
    return rowwise.backward(x, residual, cotangent)


def _derivative(x: jax.Array) -> jax.Array:
    """d silu / dx = s * (1 + x * (1 - s)), s = sigmoid(x), in float32 at least."""
    xc = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    s = jax.nn.sigmoid(xc)
    return s * (1 + xc * (1 - s))


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(x: jax.Array, residual: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: g * silu'(x)."""
    del residual
    d = _derivative(x)
    return (cotangent.astype(d.dtype) * d).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, residual = _forward(x)
    return (y, residual), (_backward_formula(x, residual, t), jnp.zeros_like(residual))


@_backward.defjvp
def _backward_jvp(
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(_backward_formula, primals, tangents)
    return _backward(*primals), dx_t


@jax.custom_vjp
def _silu(x: jax.Array) -> jax.Array:
    return _forward(x)[0]


# The residuals: x and the forward's residual.
Residuals: TypeAlias = tuple[jax.Array, jax.Array]


def _silu_fwd(x: jax.Array) -> tuple[jax.Array, Residuals]:
    y, residual = _forward(x)
    return y, (x, residual)


def _silu_bwd(residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array]:
    x, residual = residuals
    return (_backward(x, residual, cotangent),)


_silu.defvjp(_silu_fwd, _silu_bwd)
