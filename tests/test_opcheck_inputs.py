"""The inputs real ops get (issue 65): for each class of input the matrix
never drew, a wrong op that the default cells now fail, in the cell named,
and a right twin they pass; and right ops the matrix failed on costs or
rounding it counted as wrong, which it now passes. Each op is small and
written here; check() runs only the cells that matter, on the CPU."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import core
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir
from test_opcheck_blind_spots import assert_caught, outcome

from jax_ladder.opcheck import OpSpec, Ulps, check
from jax_ladder.opcheck.conformance import Collectives, DeclarationError, cell_names

LOOSE = Ulps(at_value=8, at_scale=8)


def spec_of(op, reference, signature, sizes, **more):
    return OpSpec(
        name=getattr(op, "__name__", "op"),
        op=op,
        reference=reference,
        oracle=None,
        signature=signature,
        sizes=sizes,
        tolerance=more.pop("tolerance", LOOSE),
        gradient_tolerance=more.pop("gradient_tolerance", LOOSE),
        **more,
    )


# --- Masks and indices: drawn over what they hold ------------------------------------
def masked_sum(x, mask):
    return jnp.where(mask, x, 0.0).sum(-1)


def ignores_its_mask(x, mask):
    return x.sum(-1)


def test_an_op_that_ignores_its_mask_fails_the_first_cell():
    signature = "x[b,n], mask[b,n]:bool -> [b]"
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(ignores_its_mask, masked_sum, signature, sizes)
    right = spec_of(masked_sum, masked_sum, signature, sizes)
    assert_caught(wrong, right, "eager")


def take_row(x, idx):
    return jnp.take_along_axis(x, idx[:, None], axis=1)[:, 0]


def take_row_clamped_at_2(x, idx):
    return jnp.take_along_axis(x, jnp.minimum(idx, 2)[:, None], axis=1)[:, 0]


def test_an_index_past_2_is_drawn_from_the_declared_range():
    signature = "x[b,n], idx[b]:int32[0,n) -> [b]"
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(take_row_clamped_at_2, take_row, signature, sizes)
    right = spec_of(take_row, take_row, signature, sizes)
    assert_caught(wrong, right, "eager")
    # The range follows the cell's sizes: an index near 4 * n in size-n-large.
    assert_caught(wrong, right, "size-n-large")


def test_a_fully_masked_row_reaches_the_op_in_the_hard_cells():
    """hard-zeros sets a bool argument all False: a masked mean dividing by
    the count gives NaN where the reference guards the division."""

    def masked_mean(x, mask):
        count = jnp.maximum(mask.sum(-1), 1)
        return jnp.where(mask, x, 0.0).sum(-1) / count

    def unguarded_mean(x, mask):
        return jnp.where(mask, x, 0.0).sum(-1) / mask.sum(-1)

    signature = "x[b,n], mask[b,n]:bool -> [b]"
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(unguarded_mean, masked_mean, signature, sizes)
    right = spec_of(masked_mean, masked_mean, signature, sizes)
    assert_caught(wrong, right, "hard-zeros")
    # ...and a row all False in the ordinary draws too (rows 0 and 1: False, True).
    assert_caught(wrong, right, "eager")


def test_an_integer_argument_without_its_values_is_a_declaration_error():
    with pytest.raises(DeclarationError, match=r"needs the values it takes.*int32\[0,n\)"):
        spec_of(take_row, take_row, "x[b,n], idx[b]:int32 -> [b]", {"b": 4, "n": 8})


# --- Non-finite inputs ------------------------------------------------------------------
def relu(x):
    return jnp.maximum(x, 0.0)


def relu_by_step(x):
    return x * jnp.heaviside(x, 0.5)  # NaN at -inf: -inf * 0


def logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)


def logsumexp_by_hand(x):  # NaN on a row of -inf: -inf - -inf
    top = jnp.max(x, axis=-1, keepdims=True)
    return (top + jnp.log(jnp.sum(jnp.exp(x - top), -1, keepdims=True)))[..., 0]


def test_infinities_and_nan_among_the_inputs():
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(relu_by_step, relu, "x[b,n] -> [b,n]", sizes)
    right = spec_of(relu, relu, "x[b,n] -> [b,n]", sizes)
    assert_caught(wrong, right, "hard-nonfinite")


def test_a_fully_masked_row_of_minus_inf():
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(logsumexp_by_hand, logsumexp, "x[b,n] -> [b]", sizes)
    right = spec_of(logsumexp, logsumexp, "x[b,n] -> [b]", sizes)
    assert_caught(wrong, right, "hard-masked-rows")


def test_a_hard_cell_names_every_transformation_that_missed():
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(relu_by_step, relu, "x[b,n] -> [b,n]", sizes)
    message = outcome(wrong, "hard-nonfinite").message
    assert "also missed the oracle: jit, jit(vmap), jit(grad)" in message, message


def test_finite_leaves_the_non_finite_cells_out():
    right = spec_of(relu, relu, "x[b,n] -> [b,n]", {"b": 4, "n": 8}, finite=True)
    names = cell_names(right)
    assert "hard-nonfinite" not in names
    assert "hard-masked-rows" not in names
    assert "hard-huge" in names


# --- Empty axes -----------------------------------------------------------------------
def flatten_sum(x):
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2]).sum(-1)


def flatten_sum_inferred(x):  # reshape(b, -1) cannot infer -1 when b = 0
    return x.reshape(x.shape[0], -1).sum(-1)


def test_an_empty_batch():
    sizes = {"b": 4, "n": 4, "f": 8}
    signature = "x[b,n,f] -> [b]"
    wrong = spec_of(flatten_sum_inferred, flatten_sum, signature, sizes)
    right = spec_of(flatten_sum, flatten_sum, signature, sizes)
    assert "size-b-0" in cell_names(right)
    assert_caught(wrong, right, "size-b-0")


def test_an_empty_row():
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(logsumexp_by_hand, logsumexp, "x[b,n] -> [b]", sizes)
    right = spec_of(logsumexp, logsumexp, "x[b,n] -> [b]", sizes)
    assert_caught(wrong, right, "size-n-0")


def test_no_empty_axis_where_another_argument_indexes_into_it():
    right = spec_of(take_row, take_row, "x[b,n], idx[b]:int32[0,n) -> [b]", {"b": 4, "n": 8})
    assert "size-n-0" not in cell_names(right)
    assert "size-b-0" in cell_names(right)


# --- Arguments batched apart ----------------------------------------------------------
def _product_primitive(assume_same_axis: bool):
    """x * y as a primitive whose batching rule either moves each batch axis
    to the front (right), or assumes both operands share one (wrong)."""
    prim = Primitive(f"product_{'same' if assume_same_axis else 'moved'}")
    prim.def_impl(lambda x, y: x * y)
    prim.def_abstract_eval(lambda x, y: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda x, y: x * y, multiple_results=False))

    def rule(args, dims):
        x, y = args
        dx, dy = dims
        size = x.shape[dx] if dx is not None else y.shape[dy]
        if assume_same_axis and dx is not None and dy is not None:
            return prim.bind(x, y), dx
        x = batching.bdim_at_front(x, dx, size)
        y = batching.bdim_at_front(y, dy, size)
        return prim.bind(x, y), 0

    batching.primitive_batchers[prim] = rule
    return lambda x, y: prim.bind(x, y)


def test_two_arguments_batched_on_different_axes():
    # n = NEW_AXIS: the batched operands have one shape, so the wrong rule
    # multiplies mismatched elements silently instead of raising.
    sizes = {"n": 2}
    signature = "x[n,n], y[n,n] -> [n,n]"
    reference = jnp.multiply
    wrong = spec_of(_product_primitive(True), reference, signature, sizes)
    right = spec_of(_product_primitive(False), reference, signature, sizes)
    for cell in ("vmap-new-axis", "vmap-mixed", "vmap-only-x", "vmap-only-y"):
        assert outcome(wrong, cell).outcome == "passed", cell  # the old cells: blind
    message = assert_caught(wrong, right, "vmap-apart")
    assert "off by" in message


def test_one_argument_alone_on_a_non_leading_axis():
    """A rule right for a batch axis in front, wrong elsewhere, when one
    argument alone is batched."""
    prim = Primitive("scaled_front_only")
    prim.def_impl(lambda x, w: x * w)
    prim.def_abstract_eval(lambda x, w: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda x, w: x * w, multiple_results=False))

    def front_only(args, dims):
        x, w = args
        dx, dw = dims
        if dx is None:  # w alone: treats its batch axis as the front
            return prim.bind(jnp.broadcast_to(x, w.shape), w), dw
        size = x.shape[dx]
        return prim.bind(
            batching.bdim_at_front(x, dx, size), batching.bdim_at_front(w, dw, size)
        ), 0

    batching.primitive_batchers[prim] = front_only
    signature = "x[b,n], w[b,n] -> [b,n]"
    sizes = {"b": 4, "n": 4}
    wrong = spec_of(lambda x, w: prim.bind(x, w), jnp.multiply, signature, sizes)
    right = spec_of(_product_primitive(False), jnp.multiply, signature, sizes)
    assert outcome(wrong, "vmap-only-w").outcome == "passed"  # leading: the old cell passes
    assert_caught(wrong, right, "vmap-only-w-inner")


# --- Costs are not correctness --------------------------------------------------------
def row_sum(x):
    return x.sum(-1)


def row_sum_by_cumsum(x):
    return jnp.cumsum(x, axis=-1)[..., -1]


def _collectives_on_an_axis_never_declared_sharded_are_noted_not_failed():
    sizes = {"b": 4, "n": 8}
    right = spec_of(row_sum_by_cumsum, row_sum, "y[b,n] -> [b]", sizes)
    passed = outcome(right, "jit-auto-n")
    assert passed.outcome == "passed"
    assert any("collectives op {" in note for note in passed.notes), passed.notes
    held = spec_of(row_sum_by_cumsum, row_sum, "y[b,n] -> [b]", sizes, shard_map_axes=("n",))
    failed = outcome(held, "jit-auto-n")
    assert failed.outcome == "failed"
    assert "op {" in failed.message
    assert "reference {" in failed.message


def _a_budget_of_collectives_is_an_upper_bound():
    sizes = {"b": 4, "n": 8}
    budget = Collectives(
        "at most a gather, a reduction and a permute per program",
        forward={"all-gather": 2, "all-reduce": 2, "collective-permute": 2},
        gradient={"all-gather": 4, "all-reduce": 4, "collective-permute": 4, "all-to-all": 4},
        at_most=True,
    )
    within = spec_of(
        row_sum_by_cumsum,
        row_sum,
        "y[b,n] -> [b]",
        sizes,
        shard_map_axes=("n",),
        extra_collectives={"*": budget},
    )
    assert outcome(within, "jit-auto-n").outcome == "passed"
    tight = Collectives("none at all", forward={}, gradient={}, at_most=True)
    over = spec_of(
        row_sum_by_cumsum,
        row_sum,
        "y[b,n] -> [b]",
        sizes,
        shard_map_axes=("n",),
        extra_collectives={"jit-auto-n": tight},
    )
    assert "more than the budget" in outcome(over, "jit-auto-n").message


# --- Tolerances that hold a right op ---------------------------------------------------
def rms_norm(x):
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


def rms_norm_upcast(x):
    y = x.astype(jnp.float32)
    return (y / jnp.sqrt(jnp.mean(y * y, -1, keepdims=True) + 1e-6)).astype(x.dtype)


def rms_norm_upcast_stopped(x):  # the norm's gradient dropped
    y = x.astype(jnp.float32)
    norm = jax.lax.stop_gradient(jnp.sqrt(jnp.mean(y * y, -1, keepdims=True) + 1e-6))
    return (y / norm).astype(x.dtype)


@pytest.mark.parametrize("cell", ["check-grads-1", "check-grads-2"])
def test_an_op_computing_in_float32_inside_is_checked_in_float32(cell):
    sizes = {"b": 4, "n": 8}
    wrong = spec_of(rms_norm_upcast_stopped, rms_norm, "x[b,n] -> [b,n]", sizes)
    right = spec_of(rms_norm_upcast, rms_norm, "x[b,n] -> [b,n]", sizes)
    message = assert_caught(wrong, right, cell)
    assert "in float32 (the op computes in float32 inside" in message


def float32_only(op):
    """op behind a float32-only kernel's check: float64 raises."""

    def kernel(x):
        if x.dtype == jnp.float64:
            raise TypeError("the kernel takes float32 only")
        return op(x)

    return kernel


def test_one_word_for_a_float32_only_kernel():
    """float64=False: check-grads-* run in float32, not refused one by one."""
    sizes = {"b": 4, "n": 8}
    signature = "x[b,n] -> [b,n]"
    right = spec_of(float32_only(rms_norm), rms_norm, signature, sizes, float64=False)
    wrong = spec_of(
        float32_only(rms_norm_upcast_stopped), rms_norm, signature, sizes, float64=False
    )
    message = assert_caught(wrong, right, "check-grads-1")
    assert "the op takes no float64" in message
    unsaid = spec_of(float32_only(rms_norm), rms_norm, signature, sizes)
    assert "float32 only" in outcome(unsaid, "check-grads-1").message


def test_a_tolerance_on_the_inputs_scale():
    """Ulps(at_inputs=...): a small result of large terms (a cross-entropy
    of logits near 1000) may be off by ulps of the inputs' largest value,
    which neither the result's own value nor its scale shows."""
    from jax_ladder.opcheck.compare import assert_close

    want = np.array([0.5, 1.25], np.float64)
    got = (want + 3 * float(np.spacing(np.float32(1000.0)))).astype(np.float32)
    assert_close(got, want, Ulps(at_value=1, at_inputs=4), scale=1000.0)
    with pytest.raises(AssertionError, match=r"at the inputs' largest \|value\| \(1e\+03\)"):
        assert_close(got, want, Ulps(at_value=1, at_inputs=2), scale=1000.0)
    with pytest.raises(AssertionError, match="off by"):
        assert_close(got, want, Ulps(at_value=4, at_scale=4), scale=1000.0)
    assert repr(Ulps(2)) == "Ulps(at_value=2, at_scale=0.0)"  # messages unchanged
    with pytest.raises(DeclarationError, match=r"tolerance.at_inputs must be a number"):
        spec_of(relu, relu, "x[n] -> [n]", {"n": 8}, tolerance=Ulps(1, 0, -1))


# --- Declarations the later cells would trip on ----------------------------------------
def _a_refusal_names_a_private_jax_error_by_name():
    """JAX keeps ShardingTypeError in jax._src.core: a refusal names it."""
    from jax_ladder.opcheck import Refuse

    refuse = Refuse("ShardingTypeError", r"unsharded over the axis being reduced", "contracts n")
    sizes = {"b": 4, "n": 8}
    declared = spec_of(
        row_sum_by_cumsum, row_sum, "y[b,n] -> [b]", sizes, refuse={"jit-explicit-n": refuse}
    )
    assert outcome(declared, "jit-explicit-n").outcome == "refused"
    other = Refuse("ShardingTypeError", r"no such message", "contracts n")
    mismatched = spec_of(
        row_sum_by_cumsum, row_sum, "y[b,n] -> [b]", sizes, refuse={"jit-explicit-n": other}
    )
    message = outcome(mismatched, "jit-explicit-n").message
    assert "raised ShardingTypeError" in message, message
    assert "does not match" in message, message


def _a_square_matrix_splits_its_rows():
    sizes = {"n": 8}
    square = spec_of(lambda a: a @ a, lambda a: a @ a, "a[n,n] -> [n,n]", sizes)
    for cell in ("jit-auto-n", "jit-explicit-n", "grad-grad-explicit-n"):
        result = outcome(square, cell)
        assert result.outcome == "passed", f"{cell}: {result.message}"


def _three_channels_split_three_ways():
    sizes = {"b": 4, "c": 3}
    double = spec_of(lambda x: 2 * x, lambda x: 2 * x, "x[b,c] -> [b,c]", sizes)
    for cell in ("jit-auto-c", "jit-explicit-c", "grad-grad-explicit-c"):
        result = outcome(double, cell)
        assert result.outcome == "passed", f"{cell}: {result.message}"


def _a_size_no_mesh_divides_says_which_sizes_work():
    five = spec_of(lambda x: 2 * x, lambda x: 2 * x, "x[b,c] -> [b,c]", {"b": 4, "c": 5})
    message = outcome(five, "jit-auto-c").message
    assert "size 5 splits evenly over no mesh of 4, 3 or 2 devices" in message, message


def _an_axis_named_partial_reaches_the_shard_map_cells():
    """shard-map-partial-1d is the plain shard_map cell of an axis named
    "partial": a per-shard-wrong op (it normalises each shard's rows by the
    shard's own sum) fails it."""

    def normalise(x):
        return x / jnp.sum(jnp.abs(x))

    sizes = {"partial": 8}
    wrong = spec_of(
        normalise,
        lambda x: x / jnp.sum(jnp.abs(x)),
        "x[partial] -> [partial]",
        sizes,
        shard_map_axes=("partial",),
    )
    result = outcome(wrong, "shard-map-partial-1d")
    assert result.outcome == "failed", result
    assert "jit(shard_map)" in result.message


# --- A maintainer's op: a bool mask, an index range, fully masked rows; no sample -----
def pool(x, mask, pos):
    """The mean of the rows the mask keeps (0 where it keeps none), plus the
    row at pos."""
    count = mask.sum(-1, keepdims=True)
    total = jnp.where(mask[..., None], x, 0.0).sum(-2)
    mean = jnp.where(count > 0, total / jnp.maximum(count, 1), 0.0)
    picked = jnp.take_along_axis(x, pos[..., None, None], axis=-2)[..., 0, :]
    return mean + picked


def pool_reference(x, mask, pos):
    count = mask.sum(-1)[..., None]
    mean = jnp.where(mask[..., None], x, 0.0).sum(-2) / jnp.where(count == 0, 1, count)
    chosen = jax.nn.one_hot(pos, x.shape[-2], dtype=bool)
    return mean + jnp.where(chosen[..., None], x, 0.0).sum(-2)


def _a_maintainers_masked_op_passes_every_cell_it_does_not_refuse():
    from jax_ladder.opcheck import Refuse

    gather = Refuse(
        "ShardingTypeError",
        r"out sharding could not be resolved",
        "JAX asks a gather along a split axis for its output sharding; reshard n first",
    )
    spec = spec_of(
        pool,
        pool_reference,
        "x[b,n,f], mask[b,n]:bool, pos[b]:int32[0,n) -> [b,f]",
        {"b": 4, "n": 8, "f": 4},
        batch_axes=("b",),
        shard_map_axes=("b",),
        refuse={"*explicit*-n": gather},
    )
    report = check(spec)
    assert report.ok, str(report)
    assert len(report.refused) == 4, report.counts()


# --- The cells above that need a mesh: one fresh process with 8 devices ------------------
SHARDED = [
    _collectives_on_an_axis_never_declared_sharded_are_noted_not_failed,
    _a_budget_of_collectives_is_an_upper_bound,
    _a_square_matrix_splits_its_rows,
    _a_refusal_names_a_private_jax_error_by_name,
    _a_maintainers_masked_op_passes_every_cell_it_does_not_refuse,
    _three_channels_split_three_ways,
    _a_size_no_mesh_divides_says_which_sizes_work,
    _an_axis_named_partial_reaches_the_shard_map_cells,
]


def test_the_sharding_cells_on_eight_devices():
    """Each check above that needs a mesh, in one fresh process with 8
    simulated CPU devices (JAX's device count is fixed once it starts)."""
    if len(jax.devices("cpu")) >= 4:
        for check_one in SHARDED:
            check_one()
        return
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"{__file__}::{test_the_sharding_cells_on_eight_devices.__name__}",
    ]
    command += ["-q", "-n", "0", "-p", "no:cacheprovider"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
