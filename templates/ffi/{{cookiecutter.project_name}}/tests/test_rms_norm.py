"""The FFI handler against the plain-JAX reference (itself checked against
float64 NumPy in test_reference.py): values, gradients, transforms, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from {{ cookiecutter.package_name }} import FORWARD, rms_norm, rms_norm_reference

from compare import assert_close
from oracle import GRADIENTS, VALUES, rms_norm_f64, rms_norm_vjp_f64, shape_id

# Ranks 1 to 4, size-1 axes, 4096+ rows, a long row.
SHAPES = [
    (1,),
    (7,),
    (1, 1),
    (3, 1),
    (1, 5),
    (5, 33),
    (4096, 8),
    (4100, 3),
    (2, 1, 6, 5),
    (2, 3, 4, 17),
    (16, 1000),
]
# Gradients of rows of length 1 cancel to ~eps / x**3 (see test_reference.py).
GRAD_SHAPES = [s for s in SHAPES if s[-1] > 1]
DTYPES = ["float32", "float64", "bfloat16"]


def data(rng, shape, dtype, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), dtype)


def weighted_sum(f, cotangent):
    """A scalar loss whose gradient is the VJP of f with the given cotangent."""

    def loss(x):
        return jnp.sum(cotangent * f(x).astype(cotangent.dtype))

    return loss


# --- values ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_values_match_reference(rng, shape, dtype):
    x = data(rng, shape, dtype)
    y = rms_norm(x)
    assert (y.shape, y.dtype) == (x.shape, x.dtype)
    assert_close(y, rms_norm_reference(x), VALUES)


@pytest.mark.parametrize("scale", [1e-4, 1e3, 1e18])
def test_extreme_magnitudes_float32(rng, scale):
    x = data(rng, (6, 40), "float32", scale)
    assert_close(rms_norm(x), rms_norm_f64(x), VALUES)


def test_handler_sums_in_double_where_float32_overflows(rng):
    # Squares of 1e20 overflow float32: the reference divides by inf and
    # returns zeros; the handler accumulates in double and stays right.
    x = data(rng, (4, 16), "float32", 1e20)
    assert not np.any(rms_norm_reference(x)), "expected the float32 reference to overflow"
    assert_close(rms_norm(x), rms_norm_f64(x), VALUES)


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.5])
def test_eps(rng, eps):
    x = data(rng, (5, 9), "float64", 1e-2)
    assert_close(rms_norm(x, eps=eps), rms_norm_f64(x, eps=eps), VALUES)


def test_zero_rows_give_an_empty_result():
    # XLA does not call a handler whose results are all empty.
    x = jnp.ones((0, 5), jnp.float32)
    assert rms_norm(x).shape == (0, 5)
    assert jax.grad(lambda x: rms_norm(x).sum())(x).shape == (0, 5)


def test_nan_stays_in_its_row():
    x = jnp.array([[1.0, jnp.nan, 2.0], [3.0, 4.0, 5.0]])
    y = rms_norm(x)
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()


# --- gradients --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=shape_id)
def test_gradients_match_reference(rng, shape, dtype):
    x = data(rng, shape, dtype)
    cotangent = data(rng, shape, dtype)
    got = jax.grad(weighted_sum(rms_norm, cotangent))(x)
    want = jax.grad(weighted_sum(rms_norm_reference, cotangent))(x)
    assert got.dtype == x.dtype
    assert_close(got, want, GRADIENTS)


def test_gradient_matches_numpy_at_4096_rows(rng):
    x, cotangent = data(rng, (4096, 64), "float32"), data(rng, (4096, 64), "float32")
    got = jax.jit(jax.grad(weighted_sum(rms_norm, cotangent)))(x)
    assert_close(got, rms_norm_vjp_f64(x, cotangent), GRADIENTS)


@pytest.mark.parametrize("shape", [(3,), (4, 5), (2, 3, 4)], ids=shape_id)
def test_check_grads_float64(rng, shape):
    # Reverse mode (the op is a custom_vjp), to second order: the handler
    # calls' own derivatives are plain JAX (see rms_norm.py).
    check_grads(rms_norm, (data(rng, shape, "float64"),), order=2, modes=["rev"])


def test_hessian_matches_reference(rng):
    # jax.hessian is forward over reverse: forward mode of the gradient,
    # which runs through both handler calls' derivatives.
    x, cotangent = data(rng, (3, 4), "float64"), data(rng, (3, 4), "float64")
    got = jax.hessian(weighted_sum(rms_norm, cotangent))(x)
    want = jax.hessian(weighted_sum(rms_norm_reference, cotangent))(x)
    assert_close(got, want, GRADIENTS)


def test_forward_mode_is_unavailable(rng):
    x = data(rng, (3, 4), "float32")
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(rms_norm, (x,), (x,))


# --- transforms ---------------------------------------------------------------


def test_jit_matches_eager(rng):
    x = data(rng, (9, 13), "float32")
    assert_close(jax.jit(rms_norm)(x), rms_norm(x), VALUES)
    assert_close(jax.jit(lambda x: rms_norm(x, eps=0.25))(x), rms_norm(x, eps=0.25), VALUES)


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_matches_a_loop(rng, in_axes):
    xs = data(rng, (4, 6, 10), "float32")
    want = jnp.stack([rms_norm_reference(x) for x in jnp.moveaxis(xs, in_axes, 0)])
    assert_close(jax.vmap(rms_norm, in_axes=in_axes)(xs), want, VALUES)


def test_nested_vmap_of_rank_1_inputs(rng):
    xs = data(rng, (3, 4, 10), "float64")
    assert_close(jax.vmap(jax.vmap(rms_norm))(xs), rms_norm_f64(xs), VALUES)


def test_vmap_is_one_handler_call(rng):
    # vmap_method="broadcast_all": the batch becomes more rows of one call,
    # not a loop of calls.
    hlo = jax.jit(jax.vmap(rms_norm)).lower(data(rng, (8, 6, 10), "float32")).as_text()
    assert hlo.count(f"@{FORWARD}(") == 1
    assert "while" not in hlo


def test_vmap_grad_with_an_unbatched_cotangent(rng):
    xs = data(rng, (5, 3, 7), "float64")
    weights = data(rng, (3, 7), "float64")  # closed over: not batched

    def loss(x):
        return jnp.sum(weights * rms_norm(x))

    got = jax.jit(jax.vmap(jax.grad(loss)))(xs)
    want = np.stack([rms_norm_vjp_f64(x, weights) for x in xs])
    assert_close(got, want, GRADIENTS)


def test_grad_of_vmap(rng):
    xs, cotangent = data(rng, (4, 3, 8), "float32"), data(rng, (4, 3, 8), "float32")
    got = jax.grad(weighted_sum(jax.vmap(rms_norm), cotangent))(xs)
    assert_close(got, rms_norm_vjp_f64(xs, cotangent), GRADIENTS)


# --- bad input ----------------------------------------------------------------


def ffi_forward(x, y_shape=None, rinv_shape=None, eps=1e-6):
    """The raw FFI call, without rms_norm's conversions: what any other caller
    (another wrapper, an exported artifact) can send the handler."""
    y = jax.ShapeDtypeStruct(x.shape if y_shape is None else y_shape, x.dtype)
    rinv_dtype = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
    rinv = jax.ShapeDtypeStruct(x.shape[:-1] if rinv_shape is None else rinv_shape, rinv_dtype)
    return jax.ffi.ffi_call(FORWARD, (y, rinv))(x, eps=eps)


def assert_still_usable():
    x = jnp.arange(1.0, 7.0).reshape(2, 3)
    assert_close(rms_norm(x), rms_norm_f64(x), VALUES)


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (jnp.ones((2, 3), jnp.int32), "rms_norm_fwd: unsupported dtype int32"),
        (jnp.ones((2, 3), jnp.float16), "rms_norm_fwd: unsupported dtype float16"),
        (jnp.ones((2, 3), jnp.complex64), "rms_norm_fwd: unsupported dtype complex64"),
        (jnp.float32(1.0), r"rms_norm_fwd: x must have rank >= 1"),
    ],
    ids=["int32", "float16", "complex64", "scalar"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bad_input_raises_the_handler_message(x, message, jit):
    f = jax.jit(rms_norm) if jit else rms_norm
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.block_until_ready(f(x))
    assert_still_usable()


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_rows_of_length_0_raise(jit):
    # Under jit XLA would skip the handler (its only used result is empty),
    # so rms_norm checks this one in Python as well.
    x = jnp.ones((3, 0), jnp.float32)
    f = jax.jit(rms_norm) if jit else rms_norm
    with pytest.raises(ValueError, match=r"rows of length 0 \(shape \(3, 0\)\)"):
        f(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"rows of length 0 \(shape \(3, 0\)\)"):
        ffi_forward(x)
    assert_still_usable()


def test_bad_eps_raises():
    with pytest.raises(jax.errors.JaxRuntimeError, match="eps must be finite and >= 0"):
        rms_norm(jnp.ones((2, 3)), eps=-1.0)
    with pytest.raises(TypeError, match="eps must be a Python number"):
        jax.jit(rms_norm)(jnp.ones((2, 3)), jnp.float32(1e-6))
    assert_still_usable()


def test_attributes_must_have_the_declared_type():
    # The handler binds Attr<double>("eps"): a float32 attribute fails while
    # XLA decodes the call, before the handler runs. (A Python float is F64,
    # which is why rms_norm converts eps with np.float64 explicitly.)
    x = jnp.ones((2, 3), jnp.float32)
    with pytest.raises(
        jax.errors.JaxRuntimeError, match="Wrong scalar data type: expected F64 but got F32"
    ):
        ffi_forward(x, eps=np.float32(1e-6))
    assert_close(ffi_forward(x, eps=1e-6)[0], rms_norm_f64(x), VALUES)
    assert_still_usable()


@pytest.mark.parametrize(
    ("y_shape", "rinv_shape", "message"),
    [
        ((2, 4), None, r"output y has shape \(2, 4\), expected \(2, 3\)"),
        ((6,), None, r"output y has shape \(6,\), expected \(2, 3\)"),
        (None, (3,), r"output rinv has shape \(3,\), expected \(2,\)"),
    ],
)
def test_wrong_declared_result_shape_is_caught_by_the_handler(y_shape, rinv_shape, message):
    # ffi_call trusts the declared result shapes and XLA allocates them as
    # declared: only the handler's own check stands between a mistake here
    # and an out-of-bounds write.
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        ffi_forward(jnp.ones((2, 3), jnp.float32), y_shape, rinv_shape)
    assert_still_usable()
