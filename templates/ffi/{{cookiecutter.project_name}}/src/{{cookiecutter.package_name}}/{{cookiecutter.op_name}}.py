{%- if cookiecutter.example == "rms_norm" -%}
"""RMS normalisation over the last axis, computed by C++ XLA FFI handlers.

    y = x / sqrt(mean(x**2, axis=-1) + eps)

The handlers' rows are csrc/{{ cookiecutter.op_name }}_kernels.h; rowwise.py registers them
with XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own).

No learned gain: multiply by it in JAX (`weight * {{ cookiecutter.op_name }}(x)`), where XLA
fuses the product with whatever follows.
"""
{%- else -%}
"""Your op, computed by C++ XLA FFI handlers: TODO say what it computes.

The handlers' rows are csrc/{{ cookiecutter.op_name }}_kernels.h; rowwise.py registers them
with XLA and calls them (jax.ffi.ffi_call emits a custom call), and the
jax.custom_vjp below pairs the forward handler with the backward one so that
grad works (an ffi_call has no autodiff rule of its own).
"""
{%- endif %}

from functools import partial
from typing import TypeAlias

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
    return rowwise.apply(lambda x: _{{ cookiecutter.op_name }}(x, eps), x)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _forward(x: jax.Array, eps: float) -> tuple[jax.Array, jax.Array]:
{%- if cookiecutter.example == "rms_norm" %}
    """(y, rinv): the output and 1/rms per row (the residual), which the backward reuses."""
{%- else %}
    """(y, residual): the output and the residual per row, which the backward reuses."""
{%- endif %}
    # The attributes by the names the kernel file declares (kAttributeNames).
    return rowwise.forward(x, eps=eps)


@partial(jax.custom_jvp, nondiff_argnums=(3,))
def _backward(x: jax.Array, residual: jax.Array, cotangent: jax.Array, eps: float) -> jax.Array:
    return rowwise.backward(x, residual, cotangent, eps=eps)


# An ffi_call has no derivative, and grad of grad (Hessian-vector products)
# differentiates both handler calls: the custom_vjp below runs _forward
# for its residuals and _backward for the gradient. Their derivatives are
# plain JAX, which XLA fuses and JAX can transpose; first-order gradients
# never evaluate them and stay entirely in the handlers.
{%- if cookiecutter.example == "rms_norm" %}
def _backward_formula(x: jax.Array, rinv: jax.Array, cotangent: jax.Array, eps: float) -> jax.Array:
    """What the backward handler computes: r * g - r**3 * mean(g * x) * x per row."""
    del eps  # rinv holds what the backward needs of it
    r = rinv[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    return (r * gc - r**3 * jnp.mean(gc * xc, axis=-1, keepdims=True) * xc).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    eps: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, rinv = _forward(x, eps)
    # d(1/rms) = -(1/rms)**3 * mean(x * t); the y tangent is the backward
    # formula with t as the cotangent (the Jacobian of y is symmetric).
    r = rinv[..., None]
    rinv_t = -(r**3) * jnp.mean(x.astype(r.dtype) * t.astype(r.dtype), axis=-1, keepdims=True)
    return (y, rinv), (_backward_formula(x, rinv, t, eps), rinv_t[..., 0])
{%- else %}
def _backward_formula(
    x: jax.Array, residual: jax.Array, cotangent: jax.Array, eps: float
) -> jax.Array:
    """TODO: what the backward handler computes, in plain JAX (the identity's: dx = g)."""
    del x, residual, eps
    return cotangent


@_forward.defjvp
def _forward_jvp(
    eps: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, residual = _forward(x, eps)
    # TODO: the tangents of y and of the residual (the identity's: t and 0).
    return (y, residual), (t.astype(y.dtype), jnp.zeros_like(residual))
{%- endif %}


@_backward.defjvp
def _backward_jvp(
    eps: float,
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(partial(_backward_formula, eps=eps), primals, tangents)
    return _backward(*primals, eps), dx_t


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _{{ cookiecutter.op_name }}(x: jax.Array, eps: float) -> jax.Array:
    return _forward(x, eps)[0]


# The residuals: x and the forward's residual per row.
Residuals: TypeAlias = tuple[jax.Array, jax.Array]


def _{{ cookiecutter.op_name }}_fwd(x: jax.Array, eps: float) -> tuple[jax.Array, Residuals]:
    y, residual = _forward(x, eps)
    return y, (x, residual)


def _{{ cookiecutter.op_name }}_bwd(eps: float, residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array]:
    x, residual = residuals
    return (_backward(x, residual, cotangent, eps),)


_{{ cookiecutter.op_name }}.defvjp(_{{ cookiecutter.op_name }}_fwd, _{{ cookiecutter.op_name }}_bwd)
