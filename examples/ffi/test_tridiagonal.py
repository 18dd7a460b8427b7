"""The FFI solver: values against the float64 NumPy oracle and JAX's own solver, jit, vmap,
gradients, the zero-pivot contract, bad input (in Python and in the handler itself), export."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.test_util import check_grads
from reference import (
    lax_tridiagonal_solve,
    numpy_residual,
    numpy_solve,
    numpy_vjp,
    random_system,
)

tridiagonal = pytest.importorskip("tridiagonal", exc_type=ImportError)
solve = tridiagonal.tridiagonal_solve

F32, F64 = np.float32, np.float64
TOL = {F32: 2e-6, F64: 1e-13}  # max error relative to max |x| (or max |gradient|)
DTYPES = pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
# n = 1 and 2 (no interior rows), batch ranks 0 to 2, long systems. The handler solves blocks
# of up to 16 systems side by side and a last 1 to 3 one by one (csrc/thomas_block.h), so
# batches of 1 to 3 (one by one), 4 and 5 (one part-filled block), 16 (one full block),
# 37 = 16 + 16 + 5 and 3 * 7 = 16 + 5 (full and part-filled blocks) and 18 = 16 + 2 (a block
# and two alone) cover every path and seam.
SHAPES = [
    (1,),
    (2,),
    (3,),
    (17,),
    (5, 1),
    (4, 2),
    (4, 3),
    (16, 5),
    (37, 9),
    (18, 6),
    (3, 7, 11),
    (16, 1),
    (20, 2),
    (40, 3000),
    (2, 50_000),
]


def relative_error(got, want):
    want = np.asarray(want, F64)
    return np.max(np.abs(np.asarray(got, F64) - want)) / np.max(np.abs(want))


def sum_with(x_bar):
    """A scalar loss whose gradient is exactly the VJP with cotangent x_bar."""
    return lambda *system: jnp.sum(x_bar * solve(*system))


# --- values ---------------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_match_numpy_and_jax(dtype, shape, rng):
    system = random_system(rng, shape, dtype)
    x = solve(*system)
    assert x.dtype == dtype
    assert x.shape == shape
    if shape[-1] <= 1000:  # the dense oracle needs n^2 memory
        assert relative_error(x, numpy_solve(*system)) < TOL[dtype]
    # Dominance margin 1 makes the residual an error bound at any size (reference.py).
    error_bound = np.max(np.abs(numpy_residual(*system, x)))
    assert error_bound / np.max(np.abs(np.asarray(x, F64))) < TOL[dtype]
    assert relative_error(x, lax_tridiagonal_solve(*system)) < 2 * TOL[dtype]


@DTYPES
@pytest.mark.parametrize("batch", [37, 18])
@pytest.mark.parametrize("n", [1, 2, 17, 40])
def test_blocked_and_one_by_one_paths_give_the_same_bits(dtype, batch, n, rng):
    """Every system solved alone (one by one) gives the same bits as in the batch (in a full
    or part-filled block): the same operations in the same order, only interleaved."""
    system = random_system(rng, (batch, n), dtype)
    together = solve(*system)
    for k in range(batch):
        np.testing.assert_array_equal(together[k], solve(*(a[k] for a in system)))


def test_ignored_ends_do_not_matter(rng):
    dl, d, du, b = random_system(rng, (20, 6), F64)
    other_dl = dl.at[..., 0].set(jnp.inf)
    other_du = du.at[..., -1].set(jnp.nan)
    np.testing.assert_array_equal(solve(other_dl, d, du, b), solve(dl, d, du, b))
    np.testing.assert_array_equal(solve(dl, d, other_du, b), solve(dl, d, du, b))


def test_jit_gives_the_same_bits_as_eager(rng):
    system = random_system(rng, (20, 20), F32)
    np.testing.assert_array_equal(jax.jit(solve)(*system), solve(*system))


def test_empty_batch(rng):
    system = random_system(rng, (0, 5), F32)
    assert solve(*system).shape == (0, 5)


# --- vmap -----------------------------------------------------------------------------------


def test_vmap_over_all_operands_matches_the_batched_call(rng):
    system = random_system(rng, (4, 5, 10), F64)
    np.testing.assert_array_equal(jax.vmap(solve)(*system), solve(*system))
    np.testing.assert_array_equal(jax.vmap(jax.vmap(solve))(*system), solve(*system))


def test_vmap_over_a_middle_axis(rng):
    system = random_system(rng, (4, 5, 10), F64)
    got = jax.vmap(solve, in_axes=1, out_axes=1)(*system)
    np.testing.assert_array_equal(got, solve(*system))


def test_vmap_over_right_hand_sides_only(rng):
    """One matrix, many right-hand sides: broadcast_all hands the handler copies of the
    unbatched diagonals."""
    dl, d, du, _ = random_system(rng, (12,), F64)
    rhs = jnp.asarray(rng.standard_normal((21, 12)), F64)
    got = jax.vmap(solve, in_axes=(None, None, None, 0))(dl, d, du, rhs)
    want = np.stack([numpy_solve(dl, d, du, r) for r in np.asarray(rhs)])
    assert relative_error(got, want) < TOL[F64]


# --- gradients ------------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("shape", [(1,), (2,), (9,), (3, 8), (2, 2, 5)], ids=str)
def test_gradients_match_numpy_and_jax(dtype, shape, rng):
    system = random_system(rng, shape, dtype)
    x_bar = jnp.asarray(rng.standard_normal(shape), dtype)
    grads = jax.grad(sum_with(x_bar), argnums=(0, 1, 2, 3))(*system)
    reference = jax.grad(
        lambda *s: jnp.sum(x_bar * lax_tridiagonal_solve(*s)), argnums=(0, 1, 2, 3)
    )(*system)
    for name, got, want, jax_want in zip(
        ("dl", "d", "du", "b"), grads, numpy_vjp(*system, x_bar), reference, strict=True
    ):
        assert got.dtype == dtype, name
        scale = np.max(np.abs(want))
        if scale == 0:  # dl and du of a 1 x 1 system are both ignored
            np.testing.assert_array_equal(got, 0)
            continue
        assert relative_error(got, want) < 4 * TOL[dtype], name
        assert np.max(np.abs(np.asarray(got, F64) - jax_want)) < 4 * TOL[dtype] * scale, name


def test_gradients_of_the_ignored_ends_are_zero(rng):
    system = random_system(rng, (3, 6), F64)
    g_dl, _, g_du, _ = jax.grad(sum_with(jnp.ones((3, 6))), argnums=(0, 1, 2, 3))(*system)
    np.testing.assert_array_equal(g_dl[..., 0], 0)
    np.testing.assert_array_equal(g_du[..., -1], 0)


@pytest.mark.parametrize("shape", [(1,), (2,), (7,), (2, 5)], ids=str)
def test_check_grads_reverse_mode_first_and_second_order(shape, rng):
    system = random_system(rng, shape, F64)
    check_grads(solve, system, order=2, modes=["rev"])


def test_grad_under_jit_and_vmap(rng):
    system = random_system(rng, (4, 9), F64)
    x_bar = jnp.asarray(rng.standard_normal(9), F64)
    per_system = jax.jit(jax.vmap(jax.grad(sum_with(x_bar), argnums=(0, 1, 2, 3))))(*system)
    wanted = numpy_vjp(*system, np.broadcast_to(x_bar, (4, 9)))
    for got, want in zip(per_system, wanted, strict=True):
        assert np.max(np.abs(np.asarray(got) - want)) < 4 * TOL[F64] * np.max(np.abs(want))


# --- zero pivots ----------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("batch", [21, 18])
def test_zero_pivot_gives_nan_for_that_system_only(dtype, batch, rng):
    """System 0 has d[0] = 0; systems 5 and the last a zero second pivot,
    d[1] - dl[1] du[0] / d[0] = 0. All are nonsingular (a solver that pivots solves them), but
    the Thomas algorithm does not pivot: their x is all NaN, never a wrong number, and the
    other systems are untouched. The last system is in a part-filled block (21 = 16 + 5) or
    solved alone (18 = 16 + 2)."""
    dl, d, du, b = (np.array(a) for a in random_system(rng, (batch, 4), dtype))
    d[0, 0] = 0.0
    for k in (5, batch - 1):
        d[k, 0], du[k, 0], dl[k, 1], d[k, 1] = 1.0, 2.0, 3.0, 6.0
    singular = np.isin(np.arange(batch), [0, 5, batch - 1])
    assert np.isfinite(numpy_solve(dl, d, du, b)).all()  # nonsingular after all
    x = np.asarray(solve(dl, d, du, b))
    assert np.isnan(x[singular]).all()
    want = numpy_solve(*(a[~singular] for a in (dl, d, du, b)))
    assert relative_error(x[~singular], want) < TOL[dtype]
    # The process is fine, and so is the gradient: NaN where x is.
    grads = jax.grad(sum_with(jnp.ones((batch, 4), dtype)), argnums=(0, 1, 2, 3))(dl, d, du, b)
    assert np.isnan(grads[3][singular]).all()
    assert np.isfinite(grads[3][~singular]).all()


# --- bad input ------------------------------------------------------------------------------


def good(shape=(2, 5), dtype=F32):
    """A valid, diagonally dominant system (or, with an int dtype, the same values as ints)."""
    return [jnp.full(shape, v, dtype) for v in (1, 4, 1, 2)]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda s: [a.astype(jnp.int32) for a in s], TypeError, "d has dtype int32"),
        (lambda s: [a.astype(jnp.float16) for a in s], TypeError, "expected float32 or float64"),
        (lambda s: [s[0].astype(F64), *s[1:]], TypeError, "dl has dtype float64 but d has"),
        (lambda s: [*s[:3], s[3][:, :4]], ValueError, "b has shape (2, 4) but d has (2, 5)"),
        (lambda s: [s[0][0], *s[1:]], ValueError, "dl has shape (5,) but d has (2, 5)"),
        (lambda s: [a[0, 0] for a in s], ValueError, "d is a scalar"),
        (lambda s: [a[:, :0] for a in s], ValueError, "systems of size 0"),
    ],
    ids=["int", "float16", "mixed-dtypes", "b-shape", "dl-rank", "scalar", "n=0"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bad_input_raises_a_clear_python_error(change, error, message, jit):
    fn = jax.jit(solve) if jit else solve
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        fn(*change(good()))
    np.testing.assert_allclose(solve(*good()), numpy_solve(*good()), rtol=1e-6)


def raw_call(operands, result):
    """The handler without the Python checks, to show it refuses bad buffers itself."""
    return jax.ffi.ffi_call(tridiagonal.TARGET, result)(*operands)


@pytest.mark.parametrize(
    ("operands", "result", "message"),
    [
        (good(dtype=np.int32), jax.ShapeDtypeStruct((2, 5), np.int32), "unsupported dtype int32"),
        (
            [good()[0].astype(F64), *good()[1:]],
            jax.ShapeDtypeStruct((2, 5), F32),
            "dl has dtype float64, expected float32 like d",
        ),
        (
            [*good()[:3], good((2, 4))[3]],
            jax.ShapeDtypeStruct((2, 5), F32),
            r"b has shape \(2, 4\), expected \(2, 5\) like d",
        ),
        (good(), jax.ShapeDtypeStruct((2, 4), F32), r"result x has shape \(2, 4\)"),
        (good(), jax.ShapeDtypeStruct((2, 5), F64), "result x has dtype float64"),
        ([a[0, 0] for a in good()], jax.ShapeDtypeStruct((), F32), "rank >= 1"),
    ],
    ids=["int", "mixed-dtypes", "b-shape", "result-shape", "result-dtype", "scalar"],
)
def test_handler_refuses_bad_buffers_and_the_process_stays_usable(operands, result, message):
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.block_until_ready(raw_call(operands, result))
    np.testing.assert_allclose(solve(*good()), numpy_solve(*good()), rtol=1e-6)


# --- export ---------------------------------------------------------------------------------


def test_export_needs_an_explicit_opt_in_and_then_round_trips(rng):
    """jax.export refuses custom calls, whose ABI JAX cannot promise to keep; opting in with
    DisabledSafetyCheck.custom_call works, but the artifact then runs only where this target
    is registered with a compatible handler (README.md)."""
    specs = [jax.ShapeDtypeStruct((3, 5), F32)] * 4
    # For the CPU, the handler's one platform (export's default is the default backend's).
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility"):
        export.export(jax.jit(solve), platforms=("cpu",))(*specs)
    opt_in = [export.DisabledSafetyCheck.custom_call(tridiagonal.TARGET)]
    exported = export.export(jax.jit(solve), platforms=("cpu",), disabled_checks=opt_in)(*specs)
    system = random_system(rng, (3, 5), F32)
    restored = export.deserialize(exported.serialize())
    np.testing.assert_array_equal(restored.call(*system), solve(*system))


# --- platforms ------------------------------------------------------------------------------

CPU_ONLY = "tridiagonal_solve: this example's FFI handler is CPU-only"


@pytest.mark.parametrize("platforms", [("cuda",), ("rocm",), ("tpu",), ("cpu", "cuda")], ids=str)
def test_lowering_for_a_platform_without_the_handler_is_refused_clearly(platforms):
    """The handler is registered for the CPU alone. Lowered for another platform, the call
    is refused while lowering, saying how to run it on the CPU, not left for XLA to fail
    with "No FFI handler registered" when it compiles (and for every test on a GPU)."""
    specs = [jax.ShapeDtypeStruct((3, 5), F32)] * 4
    traced = jax.jit(solve).trace(*specs)
    with pytest.raises(NotImplementedError, match=CPU_ONLY) as refusal:
        traced.lower(lowering_platforms=platforms)
    assert "jax.default_device" in str(refusal.value)
    gradient = jax.jit(jax.grad(sum_with(jnp.ones((3, 5), F32)), argnums=(0, 1, 2, 3)))
    with pytest.raises(NotImplementedError, match=CPU_ONLY):
        gradient.trace(*specs).lower(lowering_platforms=platforms)  # the backward call too
    with pytest.raises(NotImplementedError, match=CPU_ONLY):
        export.export(jax.jit(solve), platforms=platforms)(*specs)


def test_the_tests_run_on_the_cpu_device():
    """conftest.py pins the default device, so that on a GPU machine these tests check the
    handler instead of the refusal."""
    assert jax.config.jax_default_device == "cpu"
    assert solve(*good()).devices() == {jax.devices("cpu")[0]}


def test_the_cpu_lowering_is_the_bare_custom_call():
    specs = [jax.ShapeDtypeStruct((3, 5), F32)] * 4
    text = jax.jit(solve).trace(*specs).lower(lowering_platforms=("cpu",)).as_text()
    assert text.count("stablehlo.custom_call") == 1
    assert tridiagonal.TARGET in text


ACCELERATORS = [d for d in jax.devices() if d.platform != "cpu"]


@pytest.mark.skipif(not ACCELERATORS, reason="needs a GPU or TPU device (none here)")
def test_on_an_accelerator_uncommitted_operands_run_on_the_cpu_and_placed_ones_are_refused(rng):
    """Where the default backend is an accelerator: the wrapper runs uncommitted operands on
    the CPU (conftest pins the tests' default device there; here it is the accelerator), and
    operands placed on the accelerator get the one clear refusal."""
    system = random_system(rng, (4, 6), F64)
    with jax.default_device(ACCELERATORS[0]):
        uncommitted = [jnp.asarray(np.asarray(a)) for a in system]
        # Compared with the values the accelerator holds: a TPU's emulated float64 keeps
        # fewer significand bits than IEEE's, so they are not always `system`'s.
        held = [np.asarray(a) for a in uncommitted]
        result = solve(*uncommitted)
        assert result.devices() == {jax.devices("cpu")[0]}
        np.testing.assert_array_equal(result, solve(*held))
        placed = [jax.device_put(a, ACCELERATORS[0]) for a in system]
        with pytest.raises(NotImplementedError, match=CPU_ONLY):
            solve(*placed)
        with pytest.raises(NotImplementedError, match=CPU_ONLY):
            jax.jit(solve)(*placed)
