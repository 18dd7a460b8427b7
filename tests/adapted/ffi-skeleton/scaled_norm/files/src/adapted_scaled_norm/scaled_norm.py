"""Scaled RMS normalisation over the last axis, computed by C++ XLA FFI handlers.

    y = scale * x / sqrt(mean(x**2, axis=-1) + eps)

The handlers' rows are csrc/scaled_norm_kernels.h; rowwise.py registers them
with XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own). Both handlers take
the two attributes, eps and scale.
"""

from functools import partial
from typing import TypeAlias

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def scaled_norm(x: ArrayLike, eps: float = 1e-6, scale: float = 2.0) -> jax.Array:
    """scale * x / sqrt(mean(x**2) + eps) over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. eps, scale: Python numbers (attributes
    of the compiled call, so they cannot be traced). Differentiable (reverse
    mode), works under jit and vmap; a sharded last axis is gathered first.
    """
    x = jnp.asarray(x)
    try:
        eps, scale = float(eps), float(scale)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(
            "scaled_norm: eps and scale must be Python numbers; they are compile-time "
            "attributes of the FFI call and cannot be traced values"
        ) from err
    return rowwise.apply(lambda x: _scaled_norm(x, eps, scale), x)


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _forward(x: jax.Array, eps: float, scale: float) -> tuple[jax.Array, jax.Array]:
    """(y, rinv): the output and 1/rms per row, which the backward reuses."""
    return rowwise.forward(x, eps=eps, scale=scale)


@partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _backward(
    x: jax.Array, rinv: jax.Array, cotangent: jax.Array, eps: float, scale: float
) -> jax.Array:
    return rowwise.backward(x, rinv, cotangent, eps=eps, scale=scale)


# Second derivatives differentiate both handler calls: their derivatives are
# plain JAX; first-order gradients never evaluate them.
def _backward_formula(
    x: jax.Array, rinv: jax.Array, cotangent: jax.Array, scale: float
) -> jax.Array:
    """What the backward handler computes: scale * r * (g - r**2 * mean(g * x) * x) per row."""
    r = rinv[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    k = r**2 * jnp.mean(gc * xc, axis=-1, keepdims=True)
    return (scale * r * (gc - k * xc)).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    eps: float, scale: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, rinv = _forward(x, eps, scale)
    # d(1/rms) = -(1/rms)**3 * mean(x * t); the y tangent is the backward
    # formula with t as the cotangent (the Jacobian of y is symmetric).
    r = rinv[..., None]
    rinv_t = -(r**3) * jnp.mean(x.astype(r.dtype) * t.astype(r.dtype), axis=-1, keepdims=True)
    return (y, rinv), (_backward_formula(x, rinv, t, scale), rinv_t[..., 0])


@_backward.defjvp
def _backward_jvp(
    eps: float,
    scale: float,
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(partial(_backward_formula, scale=scale), primals, tangents)
    return _backward(*primals, eps, scale), dx_t


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _scaled_norm(x: jax.Array, eps: float, scale: float) -> jax.Array:
    return _forward(x, eps, scale)[0]


# The residuals: x and 1/rms per row.
Residuals: TypeAlias = tuple[jax.Array, jax.Array]


def _scaled_norm_fwd(x: jax.Array, eps: float, scale: float) -> tuple[jax.Array, Residuals]:
    y, rinv = _forward(x, eps, scale)
    return y, (x, rinv)


def _scaled_norm_bwd(
    eps: float, scale: float, residuals: Residuals, cotangent: jax.Array
) -> tuple[jax.Array]:
    x, rinv = residuals
    return (_backward(x, rinv, cotangent, eps, scale),)


_scaled_norm.defvjp(_scaled_norm_fwd, _scaled_norm_bwd)
