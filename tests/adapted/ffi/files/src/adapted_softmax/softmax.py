"""Softmax over the last axis, computed by C++ XLA FFI handlers.

    y = exp(x - max(x)) / sum(exp(x - max(x)))

The handlers' rows are csrc/softmax_kernels.h; rowwise.py registers them
with XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own).
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from . import rowwise


def softmax(x: ArrayLike, eps: float = 1e-6) -> jax.Array:
    """softmax over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. eps: ignored (the handlers' attribute,
    kept so that the signature is the project's); a Python number.
    Differentiable (reverse mode), works under jit and vmap. An x whose
    leading axes are sharded over an explicit-axes mesh is computed shard by
    shard, with no communication, gradient included.
    """
    x = jnp.asarray(x)
    try:
        eps = float(eps)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(
            f"softmax: eps must be a Python number, got {type(eps).__name__}; it is a "
            "compile-time attribute of the FFI call and cannot be a traced value"
        ) from err
    return rowwise.apply(lambda block: _softmax(block, eps), x)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _forward(x: jax.Array, eps: float) -> tuple[jax.Array, jax.Array]:
    """(y, lse): the output and the log-sum-exp per row, which the backward reuses."""
    return rowwise.forward(x, eps=np.float64(eps))


@jax.custom_jvp
def _backward(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    return rowwise.backward(x, lse, cotangent)


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(x: jax.Array, lse: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: y * (g - sum(g * y)), y = exp(x - lse)."""
    r = lse[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    y = jnp.exp(xc - r)
    return (y * (gc - jnp.sum(gc * y, axis=-1, keepdims=True))).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    eps: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, lse = _forward(x, eps)
    # d(lse) = sum(y * t); the y tangent is the backward formula with t as the
    # cotangent (the Jacobian of softmax is symmetric).
    r = lse[..., None]
    lse_t = jnp.sum(jnp.exp(x.astype(r.dtype) - r) * t.astype(r.dtype), axis=-1)
    return (y, lse), (_backward_formula(x, lse, t), lse_t)


@_backward.defjvp
def _backward_jvp(
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(_backward_formula, primals, tangents)
    return _backward(*primals), dx_t


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _softmax(x: jax.Array, eps: float) -> jax.Array:
    return _forward(x, eps)[0]


# The residuals: x and the log-sum-exp per row.
type Residuals = tuple[jax.Array, jax.Array]


def _softmax_fwd(x: jax.Array, eps: float) -> tuple[jax.Array, Residuals]:
    y, lse = _forward(x, eps)
    return y, (x, lse)


def _softmax_bwd(eps: float, residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array]:
    del eps
    x, lse = residuals
    return (_backward(x, lse, cotangent),)


_softmax.defvjp(_softmax_fwd, _softmax_bwd)
