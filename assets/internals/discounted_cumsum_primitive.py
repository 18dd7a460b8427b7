"""A new JAX primitive, minimal but complete: the discounted cumulative sum.

    y[..., t] = x[..., t] + gamma * y[..., t-1]          (reverse=False)
    y[..., t] = x[..., t] + gamma * y[..., t+1]          (reverse=True)

along the last axis, with a static discount 0 <= gamma <= 1. Reversed, it is the discounted
return of reinforcement learning (rewards in, returns out; GAE is the same with
gamma * lambda); forward, an exponential moving sum.

One primitive, every rule a primitive needs, each a few lines:

- ``def_impl``: eager calls (a jitted version of the computation below).
- ``def_abstract_eval``: shape and dtype of the result, and the primitive's own errors, raised
  at trace time (under ``jit`` nothing has run yet).
- ``mlir.register_lowering`` with ``mlir.lower_fun``: the computation in existing JAX ops (an
  associative scan, O(log n) depth), lowered to plain StableHLO on every platform.
- ``ad.primitive_jvps``: the op is linear in x, so its JVP is the op applied to the tangent.
- ``ad.primitive_transposes``: the transpose of a discounted sum running forward is the same
  sum running backward (the matrix is lower triangular; its transpose is upper triangular).
  Reverse-mode autodiff needs this rule; derivatives of any order stay inside the primitive.
- ``batching.primitive_batchers``: the op already takes leading batch axes, so a vmapped axis
  moves to the front and the batch is one call, not a loop.

Why a primitive and not plain JAX: here, to show the pattern on an op small enough to read.
In a real project you write one when the public extension points (``jax.custom_jvp``,
``jax.custom_vjp``, ``jax.custom_batching.custom_vmap``, ``jax.ffi``) cannot say what you need:
see ``examples/internals/`` (a sparse matrix-vector product) and ``jax-ladder new internals``.
Only public registration points are used: ``jax.extend.core.Primitive``, ``jax.core.ShapedArray``,
``jax.interpreters.{mlir, ad, batching}``; ``jax.extend`` comes with no compatibility promise,
so pin the JAX minor version.

To adapt: rename the primitive, replace ``_compute`` (the computation), ``_abstract_eval`` (its
checks), the JVP (``_jvp``: for a nonlinear op, the derivative times the tangent, written with
ops that JAX can already transpose, and then no transpose rule is needed), ``_transpose``
(linear ops only), ``_batch``, and the oracles ``discounted_cumsum_reference`` (plain JAX, a
different formula) and ``discounted_cumsum_numpy`` (float64 loop). Run
``python discounted_cumsum_primitive.py``; it exits non-zero on failure.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.test_util import check_grads

# The self-check compares float32 with float64. x64 is process-global: in your own code set it
# once at program start (or not at all), not in a library module.
jax.config.update("jax_enable_x64", True)

discounted_cumsum_p = Primitive("discounted_cumsum")


def discounted_cumsum(x, gamma, *, reverse=False):
    """y[..., t] = x[..., t] + gamma * y[..., t -+ 1] along the last axis (reverse: from the end).

    gamma is a static Python number in [0, 1]; x a floating-point array with at least one axis,
    any leading axes being batch axes. Bad input raises TypeError or ValueError at trace time.
    """
    # Params are static (they key JAX's caches) and must be hashable: plain Python values.
    return discounted_cumsum_p.bind(jnp.asarray(x), gamma=float(gamma), reverse=bool(reverse))


# --- The computation, in existing JAX operations -----------------------------------------------
def _compute(x, *, gamma, reverse):
    if reverse:
        return jnp.flip(_compute(jnp.flip(x, -1), gamma=gamma, reverse=False), -1)
    # y_t = a * y_{t-1} + b composes associatively: (a1, b1) then (a2, b2) is
    # (a1 * a2, a2 * b1 + b2). A scan over (gamma, x_t) pairs has O(log n) depth.
    a = jnp.full(x.shape, gamma, x.dtype)

    def combine(first, second):
        (a1, b1), (a2, b2) = first, second
        return a1 * a2, a2 * b1 + b2

    return lax.associative_scan(combine, (a, x), axis=x.ndim - 1)[1]


# --- Abstract evaluation: shapes, dtypes, and the primitive's own errors -----------------------
def _abstract_eval(x, *, gamma, reverse):
    del reverse
    if x.ndim < 1:
        raise ValueError(f"discounted_cumsum: x must have at least one axis, got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"discounted_cumsum: x must be floating-point, got {x.dtype}")
    if not 0.0 <= gamma <= 1.0:  # also refuses NaN
        raise ValueError(f"discounted_cumsum: gamma must be in [0, 1], got {gamma}")
    return jax.core.ShapedArray(x.shape, x.dtype)


discounted_cumsum_p.def_abstract_eval(_abstract_eval)

_compiled = jax.jit(_compute, static_argnames=("gamma", "reverse"))


def _impl(x, *, gamma, reverse):
    # Eager calls skip abstract evaluation: check here too, so the user gets the primitive's
    # error rather than one from inside the implementation.
    _abstract_eval(jax.typeof(x), gamma=gamma, reverse=reverse)
    return _compiled(x, gamma=gamma, reverse=reverse)


discounted_cumsum_p.def_impl(_impl)

# --- Lowering: existing StableHLO operations, on every platform --------------------------------
mlir.register_lowering(discounted_cumsum_p, mlir.lower_fun(_compute, multiple_results=False))


# --- JVP: a linear op's tangent is the op applied to the tangent --------------------------------
def _jvp(primals, tangents, *, gamma, reverse):
    (x,), (tx,) = primals, tangents
    y = discounted_cumsum_p.bind(x, gamma=gamma, reverse=reverse)
    if type(tx) is ad.Zero:  # a symbolic zero: x is not being differentiated
        return y, ad.Zero.from_primal_value(y)
    return y, discounted_cumsum_p.bind(tx, gamma=gamma, reverse=reverse)


ad.primitive_jvps[discounted_cumsum_p] = _jvp


# --- Transpose: the same sum, run the other way ------------------------------------------------
def _transpose(ct, x, *, gamma, reverse):
    # x is an ad.UndefinedPrimal here (the op is linear in its only operand).
    assert ad.is_undefined_primal(x)
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    return [discounted_cumsum_p.bind(ct, gamma=gamma, reverse=not reverse)]


ad.primitive_transposes[discounted_cumsum_p] = _transpose


# --- Batching: one call with the batch axis in front, not a loop -------------------------------
def _batch(args, dims, *, gamma, reverse):
    (x,), (dim,) = args, dims
    # The op runs along the last axis and treats every other one as a batch axis. vmap may hand
    # us the batch at any axis, including the last (in_axes=-1): move it to the front.
    x = jnp.moveaxis(x, dim, 0)
    return discounted_cumsum_p.bind(x, gamma=gamma, reverse=reverse), 0


batching.primitive_batchers[discounted_cumsum_p] = _batch


# --- Oracles -------------------------------------------------------------------------------------
def discounted_cumsum_reference(x, gamma, *, reverse=False):
    """Plain JAX, a different formula: x times the dense matrix of powers of gamma."""
    n = x.shape[-1]
    t, s = np.arange(n)[:, None], np.arange(n)[None, :]
    lag = (s - t) if reverse else (t - s)
    # Power on float64 NumPy exponents, then cast: jnp.where would differentiate both branches.
    weights = np.where(lag >= 0, float(gamma) ** np.maximum(lag, 0), 0.0)
    return x @ jnp.asarray(weights.T, x.dtype)


def discounted_cumsum_numpy(x, gamma, *, reverse=False):
    """Independent float64 loop, the recurrence as written."""
    x = np.asarray(x, dtype=np.float64)
    y = np.empty_like(x)
    order = range(x.shape[-1] - 1, -1, -1) if reverse else range(x.shape[-1])
    carry = np.zeros(x.shape[:-1])
    for t in order:
        carry = x[..., t] + gamma * carry
        y[..., t] = carry
    return y


# --- Self-check ----------------------------------------------------------------------------------
_failures = []
_TOL = {np.float32: 2e-6, np.float64: 1e-13}  # max error relative to max |y|


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def check_close(name, got, want, dtype):
    want = np.asarray(want, np.float64)
    if np.shape(got) != want.shape:
        return report(name, False, f"shape {np.shape(got)}, expected {want.shape}")
    err = float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))
    report(name, err <= _TOL[dtype], f"rel err {err:.1e} <= {_TOL[dtype]:.0e}")


def check_values(rng):
    print("-- values: eager, jit and the plain-JAX reference against float64 NumPy")
    # Both directions in both dtypes, and the edges gamma = 0 (y = x) and 1 (a plain cumsum).
    cases = [(np.float32, 0.9, False), (np.float32, 0.99, True), (np.float64, 0.99, True)]
    cases += [(np.float64, 0.0, True), (np.float64, 1.0, False)]
    for dtype, gamma, reverse in cases:
        x = rng.standard_normal((3, 4, 37)).astype(dtype)
        tag = f"{np.dtype(dtype).name} gamma={gamma} reverse={reverse}"
        want = discounted_cumsum_numpy(x, gamma, reverse=reverse)
        eager = discounted_cumsum(x, gamma, reverse=reverse)
        jitted = jax.jit(discounted_cumsum, static_argnums=1, static_argnames="reverse")(
            x, gamma, reverse=reverse
        )
        reference = discounted_cumsum_reference(x, gamma, reverse=reverse)
        report(f"{tag}: dtype and shape kept", eager.dtype == dtype and eager.shape == x.shape)
        check_close(f"{tag}: eager vs numpy", eager, want, dtype)
        check_close(f"{tag}: jit vs numpy", jitted, want, dtype)
        check_close(f"{tag}: plain-JAX reference vs numpy", reference, want, dtype)


def check_one_equation():
    print("-- the primitive is one equation in the jaxpr, and again in its gradient")
    x = np.ones(8)
    jaxpr = jax.make_jaxpr(lambda x: discounted_cumsum(x, 0.5))(x).jaxpr
    prims = [str(e.primitive) for e in jaxpr.eqns]
    report("make_jaxpr: exactly one equation", prims == ["discounted_cumsum"], f"{prims}")
    # vmap with the batch at the last axis: one transpose, then one call on the whole batch.
    batched = jax.make_jaxpr(jax.vmap(lambda x: discounted_cumsum(x, 0.5), in_axes=1))
    eqns = batched(np.ones((8, 3))).jaxpr.eqns
    calls = [e.invars[0].aval.shape for e in eqns if str(e.primitive) == "discounted_cumsum"]
    report("vmap: one call on the (3, 8) batch, not a loop", calls == [(3, 8)], f"{calls}")
    grad_jaxpr = jax.make_jaxpr(jax.grad(lambda x: discounted_cumsum(x, 0.5)[-1]))(x)
    prims = [str(e.primitive) for e in grad_jaxpr.jaxpr.eqns]
    report("grad's jaxpr holds the primitive (the transpose)", "discounted_cumsum" in prims)


def check_transforms(rng):
    print("-- transforms against the plain-JAX reference (float64)")
    x = rng.standard_normal((5, 6, 11))
    t = rng.standard_normal((5, 6, 11))
    ours = lambda v: discounted_cumsum(v, 0.8, reverse=True)  # noqa: E731
    ref = lambda v: discounted_cumsum_reference(v, 0.8, reverse=True)  # noqa: E731
    f64 = np.float64
    for name, in_axes in (("vmap in_axes=0", 0), ("vmap in_axes=1", 1), ("vmap in_axes=-1", -1)):
        check_close(name, jax.vmap(ours, in_axes)(x), jax.vmap(ref, in_axes)(x), f64)
    nested = jax.vmap(jax.vmap(ours, in_axes=1), in_axes=2)
    check_close("nested vmap (axes 2 then 1)", nested(x), jax.vmap(jax.vmap(ref, 1), 2)(x), f64)
    (_, jvp_ours), (_, jvp_ref) = jax.jvp(ours, (x,), (t,)), jax.jvp(ref, (x,), (t,))
    check_close("jvp", jvp_ours, jvp_ref, f64)
    loss = lambda f: lambda v: jnp.sum(jnp.sin(f(v)))  # noqa: E731
    check_close("grad", jax.grad(loss(ours))(x), jax.grad(loss(ref))(x), f64)
    check_close(
        "vmap(grad)", jax.vmap(jax.grad(loss(ours)))(x), jax.vmap(jax.grad(loss(ref)))(x), f64
    )
    (transposed,) = jax.linear_transpose(ours, x)(t)
    check_close(
        "linear_transpose = the sum run forward",
        transposed,
        discounted_cumsum_numpy(t, 0.8, reverse=False),
        f64,
    )
    _, lin = jax.linearize(ours, x)
    check_close("linearize", lin(t), jvp_ref, f64)
    try:
        check_grads(loss(ours), (x,), order=2, modes=["fwd", "rev"])
        report("check_grads(order=2, modes=['fwd', 'rev'])", True)
    except AssertionError as e:
        report("check_grads(order=2, modes=['fwd', 'rev'])", False, str(e)[:200])


def check_bad_inputs():
    print("-- bad input: the primitive's own error, at trace time (nothing runs)")
    cases = (
        ("integer x", TypeError, "floating-point", np.arange(4), 0.5),
        ("scalar x", ValueError, "at least one axis", np.float32(1.0), 0.5),
        ("gamma > 1", ValueError, "gamma must be in [0, 1]", np.ones(4), 1.5),
        ("gamma NaN", ValueError, "gamma must be in [0, 1]", np.ones(4), float("nan")),
    )
    for name, exc_type, match, x, gamma in cases:
        for how, call in (
            ("trace", lambda x=x, gamma=gamma: jax.make_jaxpr(discounted_cumsum, 1)(x, gamma)),
            ("eager", lambda x=x, gamma=gamma: discounted_cumsum(x, gamma)),
        ):
            try:
                call()
            except exc_type as e:
                report(f"{name} ({how}) -> {exc_type.__name__}", match in str(e), str(e)[:70])
            except Exception as e:  # a wrong exception type is a failed check, not a crash
                report(f"{name} ({how}) -> {exc_type.__name__}", False, repr(e)[:120])
            else:
                report(f"{name} ({how}) -> {exc_type.__name__}", False, "nothing raised")


def main():
    print(f"jax {jax.__version__} on {jax.default_backend()}")
    rng = np.random.default_rng(0)
    check_values(rng)
    check_one_equation()
    check_transforms(rng)
    check_bad_inputs()
    print(f"\nFAILED checks: {_failures}" if _failures else "\nall checks passed")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
