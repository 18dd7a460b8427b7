{%- if cookiecutter.example == "rms_norm" -%}
"""RMS normalisation over the last axis, computed by C++ XLA FFI handlers.

    y = x / sqrt(mean(x**2, axis=-1) + eps)

No learned gain: multiply by it in JAX (`weight * {{ cookiecutter.op_name }}(x)`), where XLA
fuses the product with whatever follows.
{%- else -%}
"""Your op, computed by C++ XLA FFI handlers: TODO say what it computes.
{%- endif %}

The handlers' rows are csrc/{{ cookiecutter.op_name }}_kernels.h; rowwise.py registers them
with XLA, calls them (jax.ffi.ffi_call emits a custom call) and pairs the
forward handler with the backward one in a jax.custom_vjp so that grad works
(an ffi_call has no autodiff rule of its own). This module names the op, checks
its attributes, and gives the plain-JAX derivatives of the two handler calls
that second derivatives (grad of grad) use.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import rowwise


def {{ cookiecutter.op_name }}(x: ArrayLike, eps: float = 1e-6) -> jax.Array:
{%- if cookiecutter.example == "rms_norm" %}
    """x / sqrt(mean(x**2) + eps) over the last axis of x, by the FFI handler.
{%- else %}
    """TODO: what your op computes, over the last axis of x, by the FFI handler.
{%- endif %}

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. eps: a Python number (it becomes an
    attribute of the compiled call, so it cannot be traced). Differentiable
    (reverse mode), works under jit and vmap. An x whose leading axes are
    sharded (auto or explicit mesh axes) is computed shard by shard, with no
    communication, gradient included, and the result is sharded like x; a
    sharded last axis is gathered first (each row must be whole on one
    device).

    The handler checks its arguments and raises jax.errors.JaxRuntimeError
    naming the problem; under jit that happens when the program runs.
    """
    x = jnp.asarray(x)
    try:
        eps = float(eps)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(
            f"{{ cookiecutter.op_name }}: eps must be a Python number, got {type(eps).__name__}; it is a "
            "compile-time attribute of the FFI call and cannot be a traced value"
        ) from err
    # The attributes by the names the kernel file declares (kAttributeNames).
    return _{{ cookiecutter.op_name }}(x, eps=eps)


# The plain-JAX derivatives of the two handler calls, which only second
# derivatives evaluate: first-order gradients run the handlers alone.
{%- if cookiecutter.example == "rms_norm" %}
def _backward_formula(x: jax.Array, rinv: jax.Array, cotangent: jax.Array, eps: float) -> jax.Array:
    """What the backward handler computes: r * g - r**3 * mean(g * x) * x per row,
    from the forward's residual rinv = 1/rms."""
    del eps  # rinv holds what the backward needs of it
    r = rinv[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    return (r * gc - r**3 * jnp.mean(gc * xc, axis=-1, keepdims=True) * xc).astype(x.dtype)


def _forward_tangents(
    x: jax.Array, rinv: jax.Array, t: jax.Array, eps: float
) -> tuple[jax.Array, jax.Array]:
    """The tangents of the forward handler's (y, rinv) for a tangent t of x."""
    # d(1/rms) = -(1/rms)**3 * mean(x * t); the y tangent is the backward
    # formula with t as the cotangent (the Jacobian of y is symmetric).
    r = rinv[..., None]
    rinv_t = -(r**3) * jnp.mean(x.astype(r.dtype) * t.astype(r.dtype), axis=-1, keepdims=True)
    return _backward_formula(x, rinv, t, eps), rinv_t[..., 0]
{%- else %}
def _backward_formula(
    x: jax.Array, residual: jax.Array, cotangent: jax.Array, eps: float
) -> jax.Array:
    """TODO: what the backward handler computes, in plain JAX (the identity's: dx = g)."""
    del x, residual, eps
    return cotangent


def _forward_tangents(
    x: jax.Array, residual: jax.Array, t: jax.Array, eps: float
) -> tuple[jax.Array, jax.Array]:
    """TODO: the tangents of the forward handler's (y, residual) for a tangent t
    of x (the identity's: t and 0)."""
    del eps
    return t.astype(x.dtype), jnp.zeros_like(residual)
{%- endif %}


_{{ cookiecutter.op_name }} = rowwise.differentiable(_backward_formula, _forward_tangents)
