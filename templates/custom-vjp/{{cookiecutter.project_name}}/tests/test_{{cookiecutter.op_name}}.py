"""The example's own tests (optional: delete this file and tests/oracle.py
when you adapt the starter to your own op; the conformance matrix and
tests/test_reference.py work from tests/op_spec.py alone).

The custom rule against the float64 NumPy oracle (and the plain-JAX
reference where it is defined): values, gradients, transforms, edge cases.

Values and gradients are graded by float64 NumPy, never by the reference alone:
the reference is the same formula in the same dtype, so a precision loss they
share (a half-precision overflow, a narrow accumulator) would pass unseen."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

from compare import Ulps, assert_close
from op_spec import DISTANCES, GRADIENTS, distances_f64, distances_vjp_f64
from oracle import (
    HESSIANS,
    distances_hessian_f64,
{%- if cookiecutter.rule == "jvp" %}
    distances_jvp_f64,
{%- endif %}
    shape_id,
)

# (n, m, features): size-1 axes, a long axis, many features.
SHAPES = [(1, 1, 1), (1, 7, 3), (6, 1, 2), (5, 4, 1), (33, 17, 8), (2048, 3, 2), (16, 16, 512)]
DTYPES = ["float32", "float64", "bfloat16", "float16"]


def points(rng, n, k, dtype, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal((n, k)), dtype=dtype)


def weighted_sum(f):
    """A scalar loss whose gradient is the VJP of f with a random cotangent."""

    def loss(x, y, cotangent):
        return jnp.sum(cotangent * f(x, y))

    return loss


# One jitted gradient for the tests below: jit compiles each shape and dtype
# once (eager dispatch of the rule, op by op, costs several times more), and
# tests with the same shapes share the compilation.
weighted_grad = jax.jit(jax.grad(weighted_sum({{ cookiecutter.op_name }}), argnums=(0, 1)))


# --- values ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_values_match_float64_oracle(rng, shape, dtype):
    # x and y are already rounded to dtype, so the oracle sees the very
    # numbers the op sees: what is left is the op's own error.
    n, m, k = shape
    x, y = points(rng, n, k, dtype), points(rng, m, k, dtype)
    d = {{ cookiecutter.op_name }}(x, y)
    assert d.dtype == x.dtype  # computed in float32 or wider, returned in the input's dtype
    assert_close(d, distances_f64(x, y), DISTANCES)


@pytest.mark.parametrize("scale", [1e-15, 1e-6, 1e6, 1e15])
def test_extreme_magnitudes_float32(rng, scale):
    # Squares of 1e15-sized differences still fit in float32; compare with
    # float64 NumPy directly, since that is what "right" means here.
    x, y = points(rng, 9, 4, "float32", scale), points(rng, 7, 4, "float32", scale)
    assert_close({{ cookiecutter.op_name }}(x, y), distances_f64(x, y), DISTANCES)


def test_float16_squares_beyond_its_range(rng):
    # |x - y| in the thousands: squares overflow float16 (max 65504) while the
    # distances fit. Computed in float16, every distance would be inf, and the
    # reference, which does just that, would agree with it.
    x, y = points(rng, 9, 4, "float16", 500), points(rng, 7, 4, "float16", 500)
    assert_close({{ cookiecutter.op_name }}(x, y), distances_f64(x, y), DISTANCES)
    cotangent = jnp.asarray(rng.standard_normal((9, 7)), "float16")
    got = weighted_grad(x, y, cotangent)
    for g, w in zip(got, distances_vjp_f64(x, y, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)


def test_zero_size_inputs():
    x, y = jnp.zeros((0, 3)), jnp.ones((4, 3))
    assert {{ cookiecutter.op_name }}(x, y).shape == (0, 4)
    gx, gy = jax.jit(jax.grad(lambda x, y: {{ cookiecutter.op_name }}(x, y).sum(), argnums=(0, 1)))(x, y)
    assert gx.shape == (0, 3)
    assert_close(gy, np.zeros((4, 3)), Ulps(0))
    # Zero features: every distance is 0.
    empty = {{ cookiecutter.op_name }}(jnp.zeros((2, 0)), jnp.zeros((3, 0)))
    assert_close(empty, np.zeros((2, 3)), Ulps(0))


def test_mixed_dtypes_promote_and_gradients_keep_input_dtypes(rng):
    x, y = points(rng, 4, 3, "float32"), points(rng, 5, 3, "float64")
    assert {{ cookiecutter.op_name }}(x, y).dtype == jnp.float64
    gx, gy = jax.jit(jax.grad(lambda x, y: {{ cookiecutter.op_name }}(x, y).sum(), argnums=(0, 1)))(x, y)
    assert (gx.dtype, gy.dtype) == (jnp.float32, jnp.float64)


# --- gradients --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_gradients_match_float64_oracle(rng, shape, dtype):
    # The cotangent is rounded to dtype too, so the oracle differentiates the
    # very numbers the op sees. The gradients keep the inputs' dtypes.
    n, m, k = shape
    x, y = points(rng, n, k, dtype), points(rng, m, k, dtype)
    cotangent = jnp.asarray(rng.standard_normal((n, m)), dtype)
    got = weighted_grad(x, y, cotangent)
    assert [g.dtype for g in got] == [x.dtype, y.dtype]
    for g, w in zip(got, distances_vjp_f64(x, y, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)


# --- the reference's derivatives --------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 2), (4096, 2, 3), (64, 64, 256)], ids=shape_id)
def test_reference_gradient_matches_numpy(rng, shape, dtype):
    # The conformance matrix grades gradients by the reference's autodiff:
    # check it against float64 NumPy. Random points never coincide, so the
    # reference's gradient is defined.
    n, m, k = shape
    x, y = points(rng, n, k, dtype), points(rng, m, k, dtype)
    cotangent = jnp.asarray(rng.standard_normal((n, m)), dtype)
    loss = weighted_sum({{ cookiecutter.op_name }}_reference)
    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, y, cotangent)
    for g, w in zip(got, distances_vjp_f64(x, y, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)


def test_reference_hessian_matches_numpy(rng):
    # Away from coincident points the NumPy Hessian, which the op's second
    # derivatives are graded by, must be plain autodiff's. (Not with one
    # feature: |u| is then linear on each side and its Hessian all zeros.)
    x, y = points(rng, 3, 2, "float64"), points(rng, 5, 2, "float64")
    weights = jnp.asarray(rng.standard_normal((3, 5)))
    loss = weighted_sum({{ cookiecutter.op_name }}_reference)
    got = jax.jit(jax.hessian(loss, argnums=(0, 1)))(x, y, weights)
    for got_row, want_row in zip(got, distances_hessian_f64(x, y, weights), strict=True):
        for g, w in zip(got_row, want_row, strict=True):
            assert_close(g, w, HESSIANS)


# --- the reason for the custom rule -----------------------------------------


def test_plain_autodiff_is_nan_where_points_coincide(rng):
    x = points(rng, 6, 3, "float32")
    grad_reference = jax.grad(lambda x: {{ cookiecutter.op_name }}_reference(x, x).sum())(x)
    assert np.isnan(grad_reference).all(), "the naive formula's gradient should be NaN here"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_custom_rule_is_right_where_points_coincide(rng, dtype):
    # Self-distances (zero diagonal) plus a duplicated point in y.
    x = points(rng, 6, 3, dtype)
    y = jnp.concatenate([x, x[:2]])
    cotangent = jnp.asarray(rng.standard_normal((6, 8)), dtype)
    got = weighted_grad(x, y, cotangent)
    want = distances_vjp_f64(x, y, cotangent)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, GRADIENTS)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_second_derivatives_match_float64_oracle(rng, dtype):
    # Exact away from coincident points; 0 where x_i == y_j, where none exists.
    # Reverse over reverse, which both custom_vjp and custom_jvp support.
    x = points(rng, 5, 3, dtype)
    y = jnp.concatenate([x[:2], points(rng, 3, 3, dtype)])  # two coincident pairs
    weights = jnp.asarray(rng.standard_normal((5, 5)), dtype)
    loss = weighted_sum({{ cookiecutter.op_name }})
    got = jax.jit(jax.jacrev(jax.jacrev(loss, (0, 1)), (0, 1)))(x, y, weights)
    want = distances_hessian_f64(x, y, weights)
    for got_row, want_row in zip(got, want, strict=True):
        for g, w in zip(got_row, want_row, strict=True):
            assert_close(g, w, HESSIANS)

    # Self-distances: the diagonal |x_i - x_i| is 0 for every x, so its
    # second derivative is exactly 0 and the Hessian is that of the other pairs.
    def self_loss(x):
        return jnp.sum(weights * {{ cookiecutter.op_name }}(x, x))

    (h_xx, h_xy), (h_yx, h_yy) = distances_hessian_f64(x, x, weights)
    want = h_xx + h_xy + h_yx + h_yy  # x stands for both arguments
    assert_close(jax.jit(jax.jacrev(jax.jacrev(self_loss)))(x), want, HESSIANS)


def test_energy_minimisation_step_stays_finite(rng):
    # A typical use: a soft repulsion energy over all pairs of one point set.
    def energy(x):
        return jnp.sum(jnp.exp(-{{ cookiecutter.op_name }}(x, x)))

    step = jax.jit(jax.grad(energy))
    x = points(rng, 32, 2, "float32")
    for _ in range(3):
        x = x - 0.1 * step(x)
    assert np.isfinite(x).all()
    assert_close(step(x), _energy_grad_f64(x), GRADIENTS)


def _energy_grad_f64(x):
    d = distances_f64(x, x)
    return distances_vjp_f64(x, x, -np.exp(-d))[0] * 2  # x appears as both x and y


# --- far from the origin -------------------------------------------------------


@pytest.mark.parametrize("offset", [1e4, -3e4])
def test_far_from_the_origin_float32(rng, offset):
    # Points about 1e4 from the origin with a spread of 1. The rule's matrix
    # products, x * rowsum(w) - w @ y, would subtract terms of size 1e4 to get
    # terms of size 1 (float32 would lose about 4 of its 7 digits): the rule
    # centres the points first. (Uncentred, every pair here would count as a
    # near-duplicate and take the slower differences form: still right, so
    # the benchmark, not this test, is what centring is for now.)
    n, m, k = 40, 30, 3
    x = points(rng, n, k, "float32") + jnp.float32(offset)
    y = points(rng, m, k, "float32") + jnp.float32(offset)
    cotangent = jnp.asarray(rng.standard_normal((n, m)), "float32")
    assert_close({{ cookiecutter.op_name }}(x, y), distances_f64(x, y), DISTANCES)
    got = weighted_grad(x, y, cotangent)
    for g, w in zip(got, distances_vjp_f64(x, y, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)
{%- if cookiecutter.rule == "jvp" %}
    # Forward mode runs the same products, untransposed.
    x_dot, y_dot = points(rng, n, k, "float32"), points(rng, m, k, "float32")
    _, got_dot = jax.jvp({{ cookiecutter.op_name }}, (x, y), (x_dot, y_dot))
    assert_close(got_dot, distances_jvp_f64(x, y, x_dot, y_dot), GRADIENTS)
{%- endif %}


# --- near-duplicates -----------------------------------------------------------


@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7])
def test_near_duplicates_float32(rng, delta):
    # The case this op exists for: points a distance delta from others, far
    # below the spread (1). The matrix products subtract terms of size
    # |x| / delta to get terms of size 1: without recomputing such pairs from
    # their differences, float32 kept 3 digits at 1e-4 and none at 1e-6.
    # Shuffled, so near pairs are not all on the diagonal, plus far points.
    n, k = 30, 3
    x = points(rng, n, k, "float32")
    copies = np.asarray(x, np.float64)[rng.permutation(n)[:20]]
    copies += delta * rng.standard_normal(copies.shape)
    y = jnp.concatenate([jnp.asarray(copies, "float32"), points(rng, 10, k, "float32")])
    want = distances_f64(x, y)
    d = {{ cookiecutter.op_name }}(x, y)
    assert_close(d, want, DISTANCES)
    # The near distances alone, so that the tolerance scales with them.
    near = (want > 0) & (want < 100 * delta)
    assert near.sum() >= 20
    assert_close(d[near], want[near], DISTANCES)
    cotangent = jnp.asarray(rng.standard_normal(want.shape), "float32")
    got = weighted_grad(x, y, cotangent)
    for g, w in zip(got, distances_vjp_f64(x, y, cotangent), strict=True):
        assert_close(g, w, GRADIENTS)
{%- if cookiecutter.rule == "jvp" %}
    # Forward mode runs the same products, untransposed.
    x_dot, y_dot = points(rng, n, k, "float32"), points(rng, y.shape[0], k, "float32")
    _, got_dot = jax.jvp({{ cookiecutter.op_name }}, (x, y), (x_dot, y_dot))
    assert_close(got_dot, distances_jvp_f64(x, y, x_dot, y_dot), GRADIENTS)
{%- endif %}


# --- transforms ---------------------------------------------------------------


def test_jit_matches_eager(rng):
    x, y = points(rng, 7, 3, "float32"), points(rng, 5, 3, "float32")
    assert_close(jax.jit({{ cookiecutter.op_name }})(x, y), {{ cookiecutter.op_name }}(x, y), DISTANCES)


def test_jit_grad_matches_reference_and_oracle(rng):
    # Random points never coincide, so the reference's autodiff is defined here.
    x, y = points(rng, 7, 3, "float64"), points(rng, 5, 3, "float64")
    cotangent = jnp.asarray(rng.standard_normal((7, 5)))
    got = jax.jit(jax.grad(weighted_sum({{ cookiecutter.op_name }})))(x, y, cotangent)
    want = jax.grad(weighted_sum({{ cookiecutter.op_name }}_reference))(x, y, cotangent)
    assert_close(got, want, GRADIENTS)
    assert_close(got, distances_vjp_f64(x, y, cotangent)[0], GRADIENTS)


def test_vmap_over_point_sets(rng):
    xs = jnp.asarray(rng.standard_normal((4, 6, 3)), jnp.float32)
    ys = jnp.asarray(rng.standard_normal((4, 5, 3)), jnp.float32)
    want = jnp.stack([{{ cookiecutter.op_name }}_reference(a, b) for a, b in zip(xs, ys, strict=True)])
    assert_close(jax.vmap({{ cookiecutter.op_name }})(xs, ys), want, DISTANCES)


def test_grad_of_vmap_with_near_duplicates_in_one_slice(rng):
    # jax.grad of the vmapped op (vmap inside, as in a batched loss), where
    # one point set has near-duplicate pairs and the other none: the rule's
    # branch for them runs batched, right for both slices.
    x = points(rng, 6, 3, "float32")
    near = x[::-1] + 1e-5 * points(rng, 6, 3, "float32")
    xs, ys = jnp.stack([x, x]), jnp.stack([near, points(rng, 6, 3, "float32")])
    cotangents = jnp.asarray(rng.standard_normal((2, 6, 6)), "float32")
    batched_loss = weighted_sum(jax.vmap({{ cookiecutter.op_name }}))
    got = jax.jit(jax.grad(batched_loss, argnums=(0, 1)))(xs, ys, cotangents)
    wants = [distances_vjp_f64(*args) for args in zip(xs, ys, cotangents, strict=True)]
    for g, w in zip(got, zip(*wants, strict=True), strict=True):
        assert_close(g, np.stack(w), GRADIENTS)


def test_vmap_grad_with_coincident_points(rng):
    xs = jnp.asarray(rng.standard_normal((3, 5, 2)))

    def self_energy(x):
        return jnp.sum({{ cookiecutter.op_name }}(x, x))

    got = jax.jit(jax.vmap(jax.grad(self_energy)))(xs)
    want = np.stack([2 * distances_vjp_f64(x, x, np.ones((5, 5)))[0] for x in xs])
    assert_close(got, want, GRADIENTS)
{% if cookiecutter.rule == "vjp" %}

def test_forward_mode_is_unavailable(rng):
    # custom_vjp defines reverse mode only: jvp, jacfwd and check_grads(modes=
    # ["fwd"]) raise. Choose rule=jvp if you need forward mode.
    x, y = points(rng, 3, 2, "float32"), points(rng, 4, 2, "float32")
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp({{ cookiecutter.op_name }}, (x, y), (x, y))
{% else %}

def test_forward_mode_matches_reference(rng):
    x, y = points(rng, 3, 2, "float64"), points(rng, 4, 2, "float64")
    x_dot, y_dot = points(rng, 3, 2, "float64"), points(rng, 4, 2, "float64")
    _, got = jax.jvp({{ cookiecutter.op_name }}, (x, y), (x_dot, y_dot))
    _, want = jax.jvp({{ cookiecutter.op_name }}_reference, (x, y), (x_dot, y_dot))
    assert_close(got, want, GRADIENTS)
    forward, reverse = jax.jacfwd({{ cookiecutter.op_name }})(x, y), jax.jacrev({{ cookiecutter.op_name }})(x, y)
    assert_close(forward, reverse, GRADIENTS)
{% endif %}

# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "error", "message"),
    [
        (np.ones(3), np.ones((2, 3)), ValueError, "x must be 2-D"),
        (np.ones((2, 3)), np.ones((1, 2, 3)), ValueError, "y must be 2-D"),
        (np.ones((2, 3)), np.ones((2, 4)), ValueError, "same number of features"),
        (np.ones((2, 3), np.int32), np.ones((2, 3)), TypeError, "x must be a real floating"),
        (np.ones((2, 3)), np.ones((2, 3), np.complex64), TypeError, "y must be a real floating"),
    ],
)
def test_bad_input_raises_clear_error(x, y, error, message):
    with pytest.raises(error, match=message):
        {{ cookiecutter.op_name }}(x, y)


def test_nan_input_gives_nan_not_a_silent_zero():
    x = jnp.array([[0.0, jnp.nan], [1.0, 2.0]])
    y = jnp.array([[0.0, 1.0]])
    assert np.isnan({{ cookiecutter.op_name }}(x, y)[0]).all()
    grad = jax.jit(jax.grad(lambda x: {{ cookiecutter.op_name }}(x, y).sum()))(x)
    assert np.isnan(grad[0]).all() and np.isfinite(grad[1]).all()
