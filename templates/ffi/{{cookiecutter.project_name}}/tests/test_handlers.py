"""The FFI handlers of the op declared in op_spec.py against its plain-JAX
reference (itself checked against the float64 oracle in test_reference.py):
values, gradients, transforms, and the handlers' checks of bad input. Nothing
here is specific to one op: it holds for any row-wise op over the last axis
(csrc/rowwise.h), with any attributes its kernel file declares."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from {{ cookiecutter.package_name }} import BACKWARD, FORWARD
from {{ cookiecutter.package_name }}.rowwise import ATTRIBUTES, OP, residual_dtype

import op_spec
from compare import assert_close
from conformance import oracle, vjp_oracle
from op_spec import SPEC

op, reference = SPEC.op, SPEC.reference
VALUES, GRADIENTS = SPEC.tolerance, SPEC.gradient_tolerance
# Second derivatives may cancel more than first ones: an op may declare
# HESSIANS in op_spec.py (each count with its reason); else GRADIENTS.
HESSIANS = getattr(op_spec, "HESSIANS", GRADIENTS)
# The handlers' attributes (rowwise.ATTRIBUTES: none, one or several), each
# at the value the op passes when called with x alone, as the conformance
# cells call it: its keyword argument's default.
PARAMETERS = inspect.signature(op).parameters
DEFAULTS = {name: np.float64(PARAMETERS[name].default) for name in ATTRIBUTES}

# Ranks 1 to 4, size-1 axes, 4096+ rows, a long row.
SHAPES = [
    (1,),
    (7,),
    (1, 1),
    (3, 1),
    (1, 5),
    (5, 33),
    (4100, 3),
    (2, 1, 6, 5),
    (2, 3, 4, 17),
    (16, 1000),
]
# Rows of length 1 are left out: there a gradient may be all cancellation
# (for RMS normalisation it is ~eps / x**3, which no float32 computation
# resolves).
GRAD_SHAPES = [s for s in SHAPES if s[-1] > 1]
DTYPES = ["float32", "float64", "bfloat16"]


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


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
    y = op(x)
    assert (y.shape, y.dtype) == (x.shape, x.dtype)
    assert_close(y, reference(x), VALUES)


def test_zero_rows_give_an_empty_result():
    # XLA does not call a handler whose results are all empty.
    x = jnp.ones((0, 5), jnp.float32)
    assert op(x).shape == (0, 5)
    assert jax.grad(lambda x: op(x).sum())(x).shape == (0, 5)


# --- gradients --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=shape_id)
def test_gradients_match_reference(rng, shape, dtype):
    x = data(rng, shape, dtype)
    cotangent = data(rng, shape, dtype)
    got = jax.grad(weighted_sum(op, cotangent))(x)
    want = jax.grad(weighted_sum(reference, cotangent))(x)
    assert got.dtype == x.dtype
    assert_close(got, want, GRADIENTS)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)], ids=shape_id)
def test_check_grads_float64(rng, shape):
    # Reverse mode (the op is a custom_vjp), to second order: the handler
    # calls' own derivatives are plain JAX (see the op's module).
    check_grads(op, (data(rng, shape, "float64"),), order=2, modes=["rev"])


def test_hessian_vector_product_matches_reference(rng):
    # Forward over reverse (what jax.hessian does, one direction at a time):
    # forward mode of the gradient, through both handler calls' derivatives.
    x, cotangent, v = (data(rng, (3, 4), "float64") for _ in range(3))

    def hvp(f):
        return jax.jvp(jax.grad(weighted_sum(f, cotangent)), (x,), (v,))[1]

    assert_close(hvp(op), hvp(reference), HESSIANS)


def test_forward_mode_is_unavailable(rng):
    x = data(rng, (3, 4), "float32")
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(op, (x,), (x,))


# --- transforms ---------------------------------------------------------------


def test_jit_matches_eager(rng):
    x = data(rng, (9, 13), "float32")
    assert_close(jax.jit(op)(x), op(x), VALUES)


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_matches_a_loop(rng, in_axes):
    xs = data(rng, (4, 6, 10), "float32")
    want = jnp.stack([reference(x) for x in jnp.moveaxis(xs, in_axes, 0)])
    assert_close(jax.vmap(op, in_axes=in_axes)(xs), want, VALUES)


def test_nested_vmap_of_rank_1_inputs(rng):
    xs = data(rng, (3, 4, 10), "float64")
    assert_close(jax.vmap(jax.vmap(op))(xs), oracle(SPEC, [xs])[0], VALUES)


def test_vmap_is_one_handler_call(rng):
    # The batching rule (rowwise.py: what vmap_method="broadcast_all" would
    # do): the batch becomes more rows of one call, not a loop of calls.
    hlo = jax.jit(jax.vmap(op)).lower(data(rng, (8, 6, 10), "float32")).as_text()
    assert hlo.count(f"@{FORWARD}(") == 1
    assert "while" not in hlo


def test_vmap_grad_with_an_unbatched_cotangent(rng):
    xs = data(rng, (5, 3, 7), "float64")
    weights = data(rng, (3, 7), "float64")  # closed over: not batched

    def loss(x):
        return jnp.sum(weights * op(x))

    got = jax.jit(jax.vmap(jax.grad(loss)))(xs)
    want = np.stack([vjp_oracle(SPEC, [x], [weights])[0] for x in xs])
    assert_close(got, want, GRADIENTS)


def test_grad_of_vmap(rng):
    xs, cotangent = data(rng, (4, 3, 8), "float32"), data(rng, (4, 3, 8), "float32")
    got = jax.grad(weighted_sum(jax.vmap(op), cotangent))(xs)
    assert_close(got, vjp_oracle(SPEC, [xs], [cotangent])[0], GRADIENTS)


# --- bad input ----------------------------------------------------------------


def ffi_forward(x, y_shape=None, residual_shape=None, attributes=None):
    """The raw FFI call, without the op's conversions: what any other caller
    (another wrapper, an exported artifact) can send the handler."""
    y = jax.ShapeDtypeStruct(x.shape if y_shape is None else y_shape, x.dtype)
    shape = x.shape[:-1] if residual_shape is None else residual_shape
    residual = jax.ShapeDtypeStruct(shape, residual_dtype(x.dtype))
    attributes = DEFAULTS if attributes is None else attributes
    return jax.ffi.ffi_call(FORWARD, (y, residual))(x, **attributes)


def assert_still_usable():
    """After a refused call the op still runs, and right. A failure here with
    the call refused as it should be is a values bug, which the values tests
    name too: the message says so, not that the refusal failed."""
    x = jnp.arange(1.0, 7.0).reshape(2, 3)
    where = (
        "after the refused call, the op on a (2, 3) float64 input: it runs, but its values "
        "are wrong (a values bug, not the error handling)"
    )
    assert_close(op(x), oracle(SPEC, [x])[0], VALUES, where=where)


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (jnp.ones((2, 3), jnp.int32), f"{OP}_forward: unsupported dtype int32"),
        (jnp.ones((2, 3), jnp.float16), f"{OP}_forward: unsupported dtype float16"),
        (jnp.ones((2, 3), jnp.complex64), f"{OP}_forward: unsupported dtype complex64"),
        (jnp.float32(1.0), rf"{OP}_forward: x must have rank >= 1"),
    ],
    ids=["int32", "float16", "complex64", "scalar"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bad_input_raises_the_handler_message(x, message, jit):
    f = jax.jit(op) if jit else op
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.block_until_ready(f(x))
    assert_still_usable()


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_rows_of_length_0_raise(jit):
    # Under jit XLA would skip the handler (its only used result is empty),
    # so the op checks this one in Python as well.
    x = jnp.ones((3, 0), jnp.float32)
    f = jax.jit(op) if jit else op
    with pytest.raises(ValueError, match=r"rows of length 0 \(shape \(3, 0\)\)"):
        f(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"rows of length 0 \(shape \(3, 0\)\)"):
        ffi_forward(x)
    assert_still_usable()


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_attributes_must_be_the_declared_ones(direction):
    # XLA hands the handler whatever attributes the caller sent: the handler
    # checks their names (one missing, one unknown) and that each is a
    # float64 (a float32 fails: rowwise.py converts with np.float64).
    x = jnp.ones((2, 3), jnp.float32)
    residual = jnp.zeros((2,), residual_dtype(x.dtype))
    target = f"{OP}_{direction}"

    def call(attributes):
        if direction == "forward":
            return ffi_forward(x, attributes=attributes)
        return jax.ffi.ffi_call(BACKWARD, jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, residual, x, **attributes
        )

    wrong = [({**DEFAULTS, "not_declared": np.float64(0)}, "expected the attributes")]
    wrong += [
        ({k: v for k, v in DEFAULTS.items() if k != name}, "expected the attributes")
        for name in DEFAULTS
    ]
    wrong += [
        ({**DEFAULTS, name: np.float32(value)}, f"attribute {name}: .*expected F64 but got F32")
        for name, value in DEFAULTS.items()
    ]
    for attributes, message in wrong + [(DEFAULTS, None)]:
        # JAX caches compiled calls by their attributes' values, and
        # np.float32(2.0) == np.float64(2.0): each call compiles afresh.
        jax.clear_caches()
        if message is None:
            jax.block_until_ready(call(attributes))
            continue
        with pytest.raises(jax.errors.JaxRuntimeError, match=f"{target}: {message}"):
            jax.block_until_ready(call(attributes))
    where = "the forward handler with the declared attributes: its values, not the attribute checks"
    assert_close(ffi_forward(x)[0], oracle(SPEC, [x])[0], VALUES, where=where)
    assert_still_usable()


@pytest.mark.parametrize(
    ("y_shape", "residual_shape", "message"),
    [
        ((2, 4), None, r"output y has shape \(2, 4\), expected \(2, 3\)"),
        ((6,), None, r"output y has shape \(6,\), expected \(2, 3\)"),
        (None, (3,), r"output residual has shape \(3,\), expected \(2,\)"),
    ],
)
def test_wrong_declared_result_shape_is_caught_by_the_handler(y_shape, residual_shape, message):
    # ffi_call trusts the declared result shapes and XLA allocates them as
    # declared: only the handler's own check stands between a mistake here
    # and an out-of-bounds write.
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        ffi_forward(jnp.ones((2, 3), jnp.float32), y_shape, residual_shape)
    assert_still_usable()
