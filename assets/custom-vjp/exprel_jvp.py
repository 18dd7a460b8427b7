"""exprel(x) = expm1(x) / x, with exprel(0) = 1, and a hand-written JVP (``jax.custom_jvp``).

The op: exprel is the phi_1 function of exponential integrators (exponential Euler, ETD
Runge-Kutta) for stiff ODEs, applied elementwise to x = h * lambda, which is often tiny (small
steps, slow modes) or large and negative (stiff modes). Its derivatives:

    exprel'(x)  = (x e^x - expm1(x)) / x^2      -> 1/2 at x = 0
    exprel''(x) = (e^x (x^2 - 2x + 2) - 2) / x^3 -> 1/3 at x = 0

Why a custom rule: the value is easy (``expm1(x) / x`` is accurate for every x != 0), but
plain autodiff of that formula computes e^x / x - expm1(x) / x^2, two nearly equal numbers of
size 1/x. It is NaN at x = 0 and near 0 loses about log10(1/|x|) digits in the first
derivative and twice that in the second: in float32 the first derivative has no correct digit
left at |x| ~ 1e-7, in float64 the second derivative has none at |x| ~ 1e-8. The rule below
uses a Taylor series for |x| < 1/2 and the closed form elsewhere, for both the value and the
derivative. JAX differentiates the rule itself with ordinary autodiff to get second
derivatives, and that is accurate too: below the cutoff it differentiates a polynomial, above
it the closed form cancels only mildly. ``main()`` checks this to within a few eps.

The cost: ``jnp.where`` evaluates both branches, so every element pays for the series as well
as the closed form. A series only as long as the dtype needs, and a closed form with one
exponential and one division, keep the rule's gradient at the plain formula's cost: ``main()``
prints the time (0.96x to 0.99x the reference's speed on a 2-core CPU, within the noise; a
20-term series, two exponentials and two divisions ran at 0.72x) and the memory (the same).

To adapt: replace the series coefficients and closed forms (``_value_series``,
``_derivative_series``, ``_value_closed_form``, ``_derivative_closed_form``), the cutoff if your
closed form cancels more or less, ``exprel_reference`` (the same op in plain JAX, the oracle
where its autodiff is trustworthy), ``exprel_numpy`` (independent float64 values and
derivatives) and the checks in ``main()``. Run ``python exprel_jvp.py``; it exits
non-zero on failure.
"""

import math
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

# The self-check compares float32 and float64. x64 is process-global: in your own code set it
# once at program start (or not at all), not in a library module.
jax.config.update("jax_enable_x64", True)


# --------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------

# Below the cutoff use the Taylor series, above it the closed forms. The closed-form derivative,
# and its own derivative that autodiff forms for second order, lose digits to cancellation as
# |x| shrinks: about log2(1/|x|) and log2(1/x^2) bits, so 1 and 2 bits at the cutoff of 1/2.
# Every element pays for the series (jnp.where evaluates both branches): a larger cutoff needs
# more terms, a smaller one costs the second derivative more digits (change it and the
# self-check prints by how much). _terms takes as few as the dtype needs: 12 for float32, 18
# for float64.
_SERIES_CUTOFF = 0.5


def _terms(dtype):
    """Series terms for this dtype: the omitted tail at the cutoff is below eps / 64 for the
    value and both derivatives (two spare terms for the second derivative, which autodiff
    takes of the truncated first-derivative series)."""
    eps = float(jnp.finfo(dtype).eps)
    n = 1
    while (n + 2) * _SERIES_CUTOFF**n / math.factorial(n + 1) >= eps / 64:
        n += 1
    return n + 2


def _value_series(dtype):  # exprel(x)  = sum_k x^k / (k+1)!
    return tuple(1 / math.factorial(k + 1) for k in range(_terms(dtype)))


def _derivative_series(dtype):  # exprel'(x) = sum_k (k+1) x^k / (k+2)!
    return tuple((k + 1) / math.factorial(k + 2) for k in range(_terms(dtype)))


def exprel(x):
    """expm1(x) / x elementwise, 1 at x = 0; accurate value, first and second derivatives.

    Raises TypeError for integer (or other non-real-floating) inputs instead of silently
    promoting them.
    """
    # Convert only non-JAX inputs: jnp.asarray on a differentiated array adds a copy.
    x = x if isinstance(x, jax.Array) else jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(
            f"exprel needs a real floating-point input, got dtype {x.dtype}; "
            "cast it first, e.g. x.astype(jnp.float32)"
        )
    return _exprel(x)


@jax.custom_jvp
def _exprel(x):
    # The value uses the series below the cutoff too, although expm1(x) / x would do: that
    # needs no special case at 0, nor for subnormal x, which XLA on CPU treats as 0 (giving
    # expm1(x) / x = 0 / 0 = NaN at x = 1e-40 in float32).
    return _series_or_closed_form(x, _value_series(x.dtype), _value_closed_form)


@_exprel.defjvp
def _exprel_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    # For second order JAX differentiates this rule: _exprel(x) again through its custom rule,
    # and _exprel_derivative(x) with ordinary autodiff (see the comment on the cutoff).
    return _exprel(x), _exprel_derivative(x) * x_dot


def _exprel_derivative(x):
    return _series_or_closed_form(x, _derivative_series(x.dtype), _derivative_closed_form)


def _value_closed_form(x):
    return jnp.expm1(x) / x  # accurate for x != 0: expm1 has no cancellation


def _derivative_closed_form(x):
    # (e^x - exprel(x)) / x, which is (x e^x - expm1(x)) / x^2: fine for |x| >= the cutoff.
    e = jnp.expm1(x)  # one exponential: e^x = expm1(x) + 1 loses nothing for |x| >= the cutoff
    r = 1 / x  # one division
    return ((e + 1) - e * r) * r


def _series_or_closed_form(x, series, closed_form):
    small = jnp.abs(x) < _SERIES_CUTOFF
    # jnp.where evaluates and differentiates both branches everywhere, and the unused branch's
    # gradient is multiplied by zero: 0 * inf = NaN. So each branch only ever sees inputs where
    # it is finite: the closed form never sees 0, the polynomial never sees a huge x.
    x_small = jnp.where(small, x, 0.0)
    x_large = jnp.where(small, 1.0, x)
    return jnp.where(small, _polynomial(series, x_small), closed_form(x_large))


def _polynomial(coefficients, x):
    """sum_k coefficients[k] * x^k by Horner's rule (Python-float coefficients keep x's dtype)."""
    result = jnp.zeros_like(x)
    for c in reversed(coefficients):
        result = result * x + c
    return result


# --------------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------------


def exprel_reference(x):
    """The formula as one would write it in plain JAX. Its value is right everywhere; its
    autodiff derivatives are right only away from 0 (NaN at 0, inaccurate near 0)."""
    return jnp.where(x == 0, 1.0, jnp.expm1(x) / x)


# Taylor coefficients of exprel, exprel', exprel'': (k+1)...(k+m) / (k+m+1)! for m = 0, 1, 2.
_NUMPY_TERMS = 40
_NUMPY_SERIES = np.array(
    [
        [math.perm(k + m, m) / math.factorial(k + m + 1) for k in range(_NUMPY_TERMS)]
        for m in range(3)
    ]
)


def exprel_numpy(x):
    """Independent float64 exprel, exprel', exprel'' (NumPy only), stacked as shape (3, n).

    40-term series for |x| < 1.5 (truncation < 1e-30), closed forms elsewhere; the switch
    point balances the alternating-series cancellation for negative x against the closed-form
    cancellation. Checked against 80-digit decimal arithmetic when written: within 5 eps.
    """
    x = np.asarray(x, dtype=np.float64)
    small = np.abs(x) < 1.5
    xs = np.where(small, x, 0.0)
    series = _NUMPY_SERIES @ (xs[None, :] ** np.arange(_NUMPY_TERMS)[:, None])
    xl = np.where(small, 1.0, x)
    e = np.exp(xl)
    closed = np.stack(
        [
            np.expm1(xl) / xl,
            (xl * e - np.expm1(xl)) / xl**2,
            (e * (xl**2 - 2 * xl + 2) - 2) / xl**3,
        ]
    )
    return np.where(small, series, closed)


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

_failures = []
_ORDER_NAMES = ("value", "1st derivative", "2nd derivative")
# Allowed relative error, in eps of the dtype, for value, 1st and 2nd derivative: a few times
# the worst error found when written (on a dense grid, against 80-digit decimal arithmetic).
# The self-check prints the worst error it sees beside each bound.
_RTOL_IN_EPS = (4, 16, 64)


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def max_rel_err(actual, expected):
    actual = np.asarray(actual, dtype=np.float64)
    # NaN compares as an infinite error instead of vanishing from the max.
    err = np.where(np.isfinite(actual), np.abs(actual - expected) / np.abs(expected), np.inf)
    return float(err.max())


def check_rel(name, actual, expected, rtol):
    err = max_rel_err(actual, expected)
    report(name, err <= rtol, f"max rel err {err:.1e} <= {rtol:.1e}")


def value_and_derivatives(f, x):
    """f, f', f'' at each element of x, via vmap(grad) and vmap(grad(grad)), jitted."""
    first = jax.grad(f)
    second = jax.grad(first)
    return jax.jit(lambda x: (jax.vmap(f)(x), jax.vmap(first)(x), jax.vmap(second)(x)))(x)


def test_points(dtype):
    """0, tiny and subnormal x, +-1e-8..50 in logspace, both sides of the series cutoff, and
    strongly stiff x = h * lambda << 0 (where e^x underflows and a polynomial would overflow)."""
    cutoff = dtype(_SERIES_CUTOFF)
    below_cutoff = np.nextafter(cutoff, dtype(0))
    magnitudes = np.concatenate(
        [[1e-40, 1e-30], np.logspace(-8, np.log10(50), 49), [below_cutoff, cutoff]]
    ).astype(dtype)
    stiff = np.array([-1e4, -1e8], dtype=dtype)
    return np.concatenate([[dtype(0)], magnitudes, -magnitudes, stiff])


def check_accuracy():
    print("-- value, 1st and 2nd derivative vs float64 NumPy at x = 0, +-1e-40..50, -1e4, -1e8")
    for dtype in (np.float32, np.float64):
        eps = np.finfo(dtype).eps
        x = test_points(dtype)
        expected = exprel_numpy(x)
        got = value_and_derivatives(exprel, x)
        for order in range(3):
            name = f"{np.dtype(dtype).name} {_ORDER_NAMES[order]}"
            report(f"{name}: dtype preserved", got[order].dtype == dtype)
            check_rel(f"{name} vs numpy", got[order], expected[order], _RTOL_IN_EPS[order] * eps)


def check_against_plain_autodiff():
    print("-- plain-JAX reference: the oracle for |x| >= 1, broken at and near 0")
    for dtype in (np.float32, np.float64):
        eps = np.finfo(dtype).eps
        x = test_points(dtype)
        far = np.abs(x) >= 1
        ours = value_and_derivatives(exprel, x[far])
        plain = value_and_derivatives(exprel_reference, x[far])
        for order in range(3):
            name = f"{np.dtype(dtype).name} {_ORDER_NAMES[order]}, |x| >= 1: custom vs reference"
            check_rel(name, ours[order], plain[order], _RTOL_IN_EPS[order] * eps)

    zero = np.zeros(1)
    plain_at_zero = value_and_derivatives(exprel_reference, zero)
    ours_at_zero = value_and_derivatives(exprel, zero)
    plain_nan = bool(np.isnan(plain_at_zero[1][0]) and np.isnan(plain_at_zero[2][0]))
    report(
        "reference at 0: value 1 but autodiff derivatives NaN",
        plain_at_zero[0][0] == 1 and plain_nan,
    )
    report(
        "custom at 0: exactly 1, 1/2, 1/3 (to rounding)",
        np.allclose([v[0] for v in ours_at_zero], [1, 1 / 2, 1 / 3], rtol=1e-15, atol=0),
    )

    # Near 0 the plain derivatives lose most digits; ours must not. (Order 1 in float32,
    # order 2 in float64: each is where that dtype's cancellation becomes catastrophic.)
    for dtype, order in ((np.float32, 1), (np.float64, 2)):
        eps = np.finfo(dtype).eps
        x = test_points(dtype)
        near = (np.abs(x) >= 1e-8) & (np.abs(x) <= 1e-4)
        expected = exprel_numpy(x[near])[order]
        plain_err = max_rel_err(value_and_derivatives(exprel_reference, x[near])[order], expected)
        ours_err = max_rel_err(value_and_derivatives(exprel, x[near])[order], expected)
        name = f"{np.dtype(dtype).name} {_ORDER_NAMES[order]}, 1e-8 <= |x| <= 1e-4"
        report(f"{name}: plain autodiff is badly off", plain_err > 1e-2, f"{plain_err:.1e}")
        rtol = _RTOL_IN_EPS[order] * eps
        report(f"{name}: custom is accurate", ours_err <= rtol, f"{ours_err:.1e} <= {rtol:.1e}")


def check_transforms():
    print("-- transforms: eager vs jit, forward mode, vmap on arrays, check_grads")
    x = np.array([-20.0, -3.0, -0.2, 0.0, 1e-6, 0.3, 2.0, 7.0])
    expected = exprel_numpy(x)
    eps = np.finfo(np.float64).eps
    rtol = [r * eps for r in _RTOL_IN_EPS]

    eager_first = np.array([jax.grad(exprel)(v) for v in x])
    eager_second = np.array([jax.grad(jax.grad(exprel))(v) for v in x])
    check_rel("eager grad (no jit, no vmap) vs numpy", eager_first, expected[1], rtol[1])
    check_rel("eager grad(grad) vs numpy", eager_second, expected[2], rtol[2])

    # Elementwise on a 2-D array: one jvp with a ones tangent gives every exprel'(x).
    grid = x.reshape(2, 4)
    value, first = jax.jit(lambda x: jax.jvp(exprel, (x,), (jnp.ones_like(x),)))(grid)
    check_rel("jit(exprel) on a 2-D array vs numpy", value.ravel(), expected[0], rtol[0])
    check_rel("forward mode (jvp) on a 2-D array vs numpy", first.ravel(), expected[1], rtol[1])
    # Forward-over-reverse: the Hessian-vector product of the elementwise op is exprel'' * v.
    _, second = jax.jvp(jax.grad(lambda x: jnp.sum(exprel(x))), (x,), (np.ones_like(x),))
    check_rel("forward-over-reverse (jvp of grad) vs numpy", second, expected[2], rtol[2])

    # Finite differences in float64, at points away from the series cutoff (0 is fine: the
    # function is smooth there and only the cutoff is a switch).
    try:
        check_grads(exprel, (x,), order=2, modes=["fwd", "rev"])
        report("check_grads(order=2, modes=['fwd', 'rev']) in float64", True)
    except AssertionError as e:
        report("check_grads(order=2, modes=['fwd', 'rev']) in float64", False, str(e)[:200])


def check_bad_inputs():
    print("-- bad inputs")
    for name, bad in (("integer array", jnp.arange(3)), ("Python int", 2)):
        try:
            exprel(bad)
        except TypeError as e:
            report(f"{name} -> TypeError", "floating-point" in str(e), str(e)[:70])
        else:
            report(f"{name} -> TypeError", False, "nothing raised")


def print_cost():
    # Printed, never asserted: a busy machine must not fail a correctness check.
    print("-- time and compiled memory of jit(grad(sum(f(x)))), float32, 1M elements")
    x = jax.random.uniform(jax.random.key(0), (1024, 1024), jnp.float32, -30.0, 30.0)
    programs = {
        name: jax.jit(jax.grad(lambda x, f=f: jnp.sum(f(x)))).lower(x).compile()
        for name, f in (("custom", exprel), ("reference", exprel_reference))
    }
    for program in programs.values():
        jax.block_until_ready(program(x))  # warm-up
    times = {name: [] for name in programs}
    # The two sides in turn, each first as often as the other, so that machine load hits both
    # alike; a call takes about a millisecond, so 101 rounds keep the median steady.
    for i in range(101):
        for name in list(programs) if i % 2 == 0 else list(programs)[::-1]:
            start = time.perf_counter()
            jax.block_until_ready(programs[name](x))
            times[name].append(time.perf_counter() - start)
    custom, reference = (statistics.median(times[k]) for k in ("custom", "reference"))
    print(
        f"       median time: custom {1e3 * custom:.2f} ms, reference {1e3 * reference:.2f} ms: "
        f"reference / custom = {reference / custom:.2f}x"
    )
    stats = {name: program.memory_analysis() for name, program in programs.items()}
    if None not in stats.values():
        custom_bytes, reference_bytes = (
            stats[k].argument_size_in_bytes
            + stats[k].output_size_in_bytes
            - stats[k].alias_size_in_bytes
            + stats[k].temp_size_in_bytes
            for k in ("custom", "reference")
        )
        print(f"       compiled memory: reference / custom = {reference_bytes / custom_bytes:.2f}x")
    print(
        "       jnp.where evaluates both branches, so each element pays for the series and the "
        "closed form; a dtype-sized series, one exp and one division keep that near the "
        "formula's cost"
    )


def main():
    print(f"jax {jax.__version__} on {jax.default_backend()}")
    check_accuracy()
    check_against_plain_autodiff()
    check_transforms()
    check_bad_inputs()
    print_cost()
    print(f"\nFAILED checks: {_failures}" if _failures else "\nall checks passed")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
