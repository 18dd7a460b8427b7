"""Fixed-point solve z* = f(params, x, z*), differentiated by the implicit function theorem.

Forward: plain fixed-point iteration inside `lax.while_loop`, stopping at a tolerance.
Backward: instead of differentiating the iterations (impossible through `while_loop`, and
memory-hungry if unrolled), solve the adjoint equation at the solution only:

    u = v + (df/dz)^T u          (v: the cotangent of z*)
    dL/dparams = (df/dparams)^T u,   dL/dx = (df/dx)^T u

so besides its inputs the backward pass keeps only the solution z*, whatever the number of
iterations, where differentiating an unrolled loop keeps every iterate.

Non-convergence is never silent: if either iteration reaches `max_iter` before meeting `tol`,
its result is NaN.
"""

from collections.abc import Callable
from functools import partial
from numbers import Integral, Real

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["fixed_point", "iterate_to_fixed_point"]


def _max_abs(a):
    return jnp.max(jnp.abs(a))


def iterate_to_fixed_point(g, z0, tol, max_iter):
    """Iterate z <- g(z) from z0; return the last iterate, or NaN if it never converged.

    Converged means max|g(z) - z| <= tol * max|g(z)| with g(z) finite. The test is relative
    on purpose: the adjoint solve in the backward pass has the scale of the cotangent, which can
    be anything (a mean over a large batch makes it tiny), and an absolute threshold would stop
    it after a step or two with a wrong gradient. A solution of exactly zero still passes
    (0 <= 0). The finiteness check matters too: a diverging iterate that overflows to inf would
    otherwise pass (inf <= tol * inf). NaN or inf iterates therefore run out to NaN.

    This function alone is not reverse-differentiable: it is the `while_loop` that the
    custom VJP below exists to avoid differentiating.
    """

    def cond(state):
        i, _, converged = state
        return jnp.logical_and(i < max_iter, jnp.logical_not(converged))

    def body(state):
        i, z, _ = state
        z_next = g(z)
        small_step = _max_abs(z_next - z) <= tol * _max_abs(z_next)
        converged = small_step & jnp.all(jnp.isfinite(z_next))
        return i + 1, z_next, converged

    _, z, converged = lax.while_loop(cond, body, (0, z0, jnp.asarray(False)))
    return jnp.where(converged, z, jnp.nan)


# `f`, `tol` and `max_iter` are nondiff_argnums. `f` is a Python function, not an array: it has
# no cotangent, yet the backward rule needs the very same `f` to linearise at z*, and
# nondiff_argnums is how custom_vjp hands it to the rule. `tol` and `max_iter` are static Python
# numbers that only steer the loops. JAX refuses tracers in these positions, and an `f` that
# closes over a value being differentiated raises UnexpectedTracerError, so everything that
# needs a gradient has to enter through `params` and `x`.
@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _fixed_point(f, tol, max_iter, params, x, z0):
    return iterate_to_fixed_point(lambda z: f(params, x, z), z0, tol, max_iter)


def _fixed_point_fwd(f, tol, max_iter, params, x, z0):
    # Call the custom_vjp function itself rather than the raw loop: when this forward rule is
    # differentiated again (second-order gradients), JAX then meets the custom rule instead of
    # a while_loop it cannot transpose.
    z_star = _fixed_point(f, tol, max_iter, params, x, z0)
    return z_star, (params, x, z_star)


def _adjoint_map(f, primals, v, u):
    """One adjoint step u -> v + (df/dz)^T u, with f linearised at primals = (params, x, z*).

    Linearising inside every step re-evaluates f(z*) once per adjoint iteration (XLA does not
    hoist it out of the loop). Linearising once outside would save that, but the loop would
    then close over the linearisation and could no longer be differentiated a second time; on
    the benchmark's problems the difference was within timing noise.
    """
    _, f_vjp = jax.vjp(f, *primals)
    return v + f_vjp(u)[2]


def _fixed_point_bwd(f, tol, max_iter, residuals, v):
    params, x, z_star = residuals
    # The adjoint equation is itself a fixed point (of a map linear in u), so solve it with the
    # same custom_vjp routine rather than a bare loop. That keeps this backward rule
    # differentiable, by the same implicit argument, which is what makes second-order
    # gradients (grad of grad) work.
    u = _fixed_point(partial(_adjoint_map, f), tol, max_iter, residuals, v, v)
    _, f_vjp = jax.vjp(f, params, x, z_star)
    grad_params, grad_x, _ = f_vjp(u)
    # z* does not depend on the starting guess (assuming the fixed point is unique).
    return grad_params, grad_x, jnp.zeros_like(z_star)


_fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


def _check_float_array(name, value):
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise TypeError(f"{name} must be an array, got {type(value).__name__}")
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise TypeError(f"{name} must have a floating dtype, got {value.dtype}")


def fixed_point(
    f: Callable,
    params,
    x,
    z0,
    *,
    tol: float,
    max_iter: int,
):
    """Solve z = f(params, x, z) by iteration from z0, differentiable in reverse mode.

    Args:
      f: callable (params, x, z) -> array with z's shape and dtype. Should be a contraction in
        z near the solution, otherwise the iteration (and its adjoint) will not converge.
        Everything it depends on that needs a gradient must come through `params` or `x`.
      params: pytree of floating arrays (e.g. weights).
      x: floating array (the layer input).
      z0: floating array, the starting guess; fixes the solution's shape and dtype.
      tol: positive float, relative tolerance of the stopping test (`iterate_to_fixed_point`).
      max_iter: positive int, iteration cap for the forward and for the adjoint solve.

    Returns:
      z* with z0's shape and dtype; NaN if the forward iteration did not converge. Gradients
      are NaN if the adjoint iteration does not converge. Gradient w.r.t. z0 is zero.

    Raises:
      TypeError / ValueError: on a non-callable f, non-float arrays, mismatched dtypes,
        f(params, x, z0) not matching z0, or a tol/max_iter that cannot work.
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    _check_float_array("z0", z0)
    _check_float_array("x", x)
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves:
        raise ValueError("params must contain at least one array")
    for i, leaf in enumerate(leaves):
        _check_float_array(f"params leaf {i}", leaf)
    dtypes = {jnp.dtype(a.dtype) for a in [z0, x, *leaves]}
    if len(dtypes) != 1:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeError(f"z0, x and params must share one floating dtype, got {names}")
    # Both must be plain Python numbers: they are static (a tracer here could not steer the
    # loops). bool counts as an int in Python, but max_iter=True is certainly a mistake.
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral):
        raise TypeError(f"max_iter must be a Python int, got {type(max_iter).__name__}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if isinstance(tol, bool) or not isinstance(tol, Real):
        raise TypeError(f"tol must be a Python float, got {type(tol).__name__}")
    if not tol > 0:  # also rejects NaN
        raise ValueError(f"tol must be > 0, got {tol}")
    eps = float(jnp.finfo(z0.dtype).eps)
    if tol < 4 * eps:
        # Rounding alone keeps successive iterates ~eps apart, so such a tol would never be met
        # and the answer would always be NaN.
        raise ValueError(f"tol={tol} is below what {z0.dtype} can resolve (use >= {4 * eps:.1e})")
    out = jax.eval_shape(f, params, x, z0)
    if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != z0.shape:
        shape = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"f(params, x, z0) must have z0's shape {z0.shape}, got {shape}")
    if out.dtype != z0.dtype:
        raise TypeError(f"f(params, x, z0) must have z0's dtype {z0.dtype}, got {out.dtype}")
    return _fixed_point(f, float(tol), int(max_iter), params, x, z0)
