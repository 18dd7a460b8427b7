"""The matrix cannot be fooled (issue 59): for each blind spot it had, a
wrong op that it now fails, in the cell named, and a right twin that it
passes there. Each op is small and written here; check() runs only the
cells that matter, on the CPU.

Each wrong op below passed every cell of the matrix before its cell
existed; the twin is the same op without the mistake, so the cell fails
the mistake and not the op."""

import math
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

from jax_ladder.opcheck import Arg, OpSpec, Refuse, Ulps, check
from jax_ladder.opcheck.conformance import cell_names, cell_size


def spec_of(op, reference, args, outputs, sizes, **more):
    return OpSpec(
        name=getattr(op, "__name__", "op"),
        op=op,
        reference=reference,
        oracle=None,
        args=args,
        outputs=outputs,
        sizes=sizes,
        tolerance=more.pop("tolerance", Ulps(at_value=8)),
        gradient_tolerance=more.pop("gradient_tolerance", Ulps(at_value=8, at_scale=8)),
        **more,
    )


def outcome(spec, cell):
    return check(spec, [cell])[cell]


def assert_caught(wrong, right, cell):
    """The wrong op fails `cell`, its right twin passes it."""
    failed = outcome(wrong, cell)
    assert failed.outcome == "failed", f"{cell} let the wrong op through: {failed}"
    passed = outcome(right, cell)
    assert passed.outcome == "passed", f"{cell} failed the right op: {passed.message}"
    return failed.message


# --- Batching: one argument alone, non-leading axes, the backward's rules ------
def scaled_reference(x, w):
    return x * w


def with_vmap_rule(rule):
    """x * w (x[n], w[n]) with a custom_vmap rule `rule(in_batched, x, w)`."""

    @jax.custom_batching.custom_vmap
    def scaled(x, w):
        return x * w

    @scaled.def_vmap
    def _(axis_size, in_batched, x, w):
        return rule(axis_size, in_batched, x, w), True

    return scaled


def right_rule(size, batched, x, w):
    x = x if batched[0] else jnp.broadcast_to(x, (size, *x.shape))
    w = w if batched[1] else jnp.broadcast_to(w, (size, *w.shape))
    return x * w


def wrong_when_w_alone(size, batched, x, w):
    # Wrong where w alone is batched: it takes the first slice of w for every slice.
    if batched[1] and not batched[0]:
        return jnp.broadcast_to(x * w[0], (size, *x.shape))
    return right_rule(size, batched, x, w)


TWO = (Arg("x", ("n",)), Arg("w", ("n",)))


def two_arg_spec(rule):
    op = with_vmap_rule(rule)
    op.__name__ = rule.__name__
    return spec_of(op, scaled_reference, TWO, (("n",),), {"n": 8}, refuse={})


def test_a_batching_rule_wrong_for_one_argument_alone_fails_vmap_only():
    # (vmap-some-args batched only the first argument: this op passed it.)
    message = assert_caught(
        two_arg_spec(wrong_when_w_alone), two_arg_spec(right_rule), "vmap-only-w"
    )
    assert "vmap of w alone" in message
    assert outcome(two_arg_spec(wrong_when_w_alone), "vmap-only-x").outcome == "passed"


def cube_with_backward_rule(out_dim_of):
    """y = x**3, a custom_vjp whose backward is a primitive with its own
    batching rule; `out_dim_of(dims)` is where the rule says the result's
    batch axis is. The right one says where the operands' is; the wrong one
    always says 0, right only for a leading batch axis."""
    backward = Primitive(f"cube_backward_{out_dim_of.__name__}")
    backward.def_impl(lambda x, g: 3 * x**2 * g)
    backward.def_abstract_eval(lambda x, g: core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(backward, mlir.lower_fun(lambda x, g: 3 * x**2 * g, False))

    def rule(args, dims):
        x, g = args
        dx, dg = dims
        # Both operands to one batch axis (the first batched one's), then the
        # elementwise product keeps it there.
        d = dx if dx is not None else dg
        size = (x if dx is not None else g).shape[d]
        x = jnp.moveaxis(x, dx, d) if dx is not None else jnp.expand_dims(x, d).repeat(size, d)
        g = jnp.moveaxis(g, dg, d) if dg is not None else jnp.expand_dims(g, d).repeat(size, d)
        return backward.bind(x, g), out_dim_of(d)

    batching.primitive_batchers[backward] = rule

    @jax.custom_vjp
    def cube(x):
        return x**3

    cube.defvjp(lambda x: (x**3, x), lambda x, g: (backward.bind(x, g),))
    cube.__name__ = f"cube_{out_dim_of.__name__}"
    return cube


def where_it_is(d):
    return d


def always_leading(d):
    return 0


def cube_reference(x):
    return x**3


def test_a_backward_batching_rule_right_only_for_a_leading_axis_fails_vmap_of_grad_inner():
    # Square slices, so the misplaced batch axis gives the right shape and
    # wrong values: no error, a silent wrong gradient.
    args, out, sizes = (Arg("x", ("n", "k")),), (("n", "k"),), {"n": 2, "k": 2}
    wrong = spec_of(cube_with_backward_rule(always_leading), cube_reference, args, out, sizes)
    right = spec_of(cube_with_backward_rule(where_it_is), cube_reference, args, out, sizes)
    assert outcome(wrong, "vmap-of-grad").outcome == "passed"  # the leading axis: right
    assert_caught(wrong, right, "vmap-of-grad-inner")


# --- Sizes: a row of one, a ragged tail ----------------------------------------
def normalized_reference(x):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def wrong_for_one_row(x):
    # Squeezes the row axis away (meant: a size-1 feature axis), so one row
    # broadcasts its mean over the wrong axis.
    y = normalized_reference(x)
    if x.shape[0] == 1:
        return x / jnp.sqrt(jnp.mean(x * x) + 1.0)
    return y


ROWS = (Arg("x", ("b", "n")),)


def test_an_op_wrong_for_a_batch_of_one_row_fails_size_1():
    wrong = spec_of(wrong_for_one_row, normalized_reference, ROWS, (("b", "n"),), {"b": 8, "n": 16})
    right = spec_of(
        normalized_reference, normalized_reference, ROWS, (("b", "n"),), {"b": 8, "n": 16}
    )
    assert_caught(wrong, right, "size-b-1")


def blocked_rows(block, ragged_ok):
    """The rows normalised a block of rows at a time: with a floor-division
    grid (ragged_ok False) the rows past the last whole block stay zero, as
    a kernel's unwritten ragged tail does."""

    def op(x):
        rows = x.shape[0]
        steps = -(-rows // block) if ragged_ok else rows // block
        out = jnp.zeros_like(x)
        for i in range(steps):
            out = out.at[i * block : (i + 1) * block].set(
                normalized_reference(x[i * block : (i + 1) * block])
            )
        return out

    op.__name__ = "blocked_ragged_ok" if ragged_ok else "blocked_floor_grid"
    return op


def test_a_floor_division_grid_fails_size_ragged():
    # The declared 16 rows are a multiple of the block, as the user's were.
    sizes = {"b": 16, "n": 8}
    wrong = spec_of(blocked_rows(4, False), normalized_reference, ROWS, (("b", "n"),), sizes)
    right = spec_of(blocked_rows(4, True), normalized_reference, ROWS, (("b", "n"),), sizes)
    assert cell_size(wrong, "b", "ragged") == 17
    assert_caught(wrong, right, "size-b-ragged")
    assert outcome(wrong, "size-b-large").outcome == "passed"  # 64 rows: whole blocks


def test_the_ragged_size_is_prime_and_shards_evenly_nowhere():
    spec = spec_of(
        normalized_reference, normalized_reference, ROWS, (("b", "n"),), {"b": 1, "n": 128}
    )
    for axis in ("b", "n"):
        size = cell_size(spec, axis, "ragged")
        assert size > max(spec.sizes[axis], 4)
        assert all(size % d for d in range(2, size))
    assert cell_size(spec, "n", "large") == 512
    assert {"size-b-1", "size-n-ragged", "size-n-large"} <= set(cell_names(spec))


# --- Magnitudes: the band between the standard normal and huge ------------------
def tripled_reference(x):
    return 3 * x


def wrong_in_a_band(x):
    # 1% off for 300 < |x| < 1e17 only.
    band = (jnp.abs(x) > 300) & (jnp.abs(x) < 1e17)
    return jnp.where(band, 3.03, 3.0) * x


def test_an_op_wrong_for_middling_magnitudes_fails_hard_magnitudes():
    args, out, sizes = (Arg("x", ("n",)),), (("n",),), {"n": 64}
    wrong = spec_of(wrong_in_a_band, tripled_reference, args, out, sizes)
    right = spec_of(tripled_reference, tripled_reference, args, out, sizes)
    for cell in ("hard-huge", "hard-exp-edge", "hard-shifted"):  # the old cases miss it
        assert outcome(wrong, cell).outcome == "passed", cell
    assert_caught(wrong, right, "hard-magnitudes")


# --- Declared inputs reach the op in every cell that adds an axis ---------------
def log_reference(x):
    return jnp.log(x)


def log_of_magnitude(x):
    """log(x), right on its declared domain x > 0 (and finite outside it,
    where the reference is NaN: an input outside the domain fails it)."""
    return jnp.log(jnp.abs(x))


def test_a_positive_domain_reaches_the_batching_cells():
    # Before, the cells that add an axis drew standard normals for it and
    # failed it there (the op's finite log |x| against the oracle's NaN).
    spec = spec_of(
        log_of_magnitude,
        log_reference,
        (Arg("x", ("n",), domain=(0.0, math.inf), smallest=1e-3),),
        (("n",),),
        {"n": 8},
    )
    report = check(spec, ["vmap-*", "scan", "size-*", "jit"])
    assert report.ok, [r.message for r in report.failed]


def test_a_sample_reaches_the_batching_cells():
    def positive(rng, shape):
        return rng.uniform(0.5, 2.0, shape)

    spec = spec_of(
        log_of_magnitude, log_reference, (Arg("x", ("n",), sample=positive),), (("n",),), {"n": 8}
    )
    report = check(spec, ["vmap-*", "scan"])
    assert report.ok, [r.message for r in report.failed]


# --- Tolerances: an exactly-zero oracle -----------------------------------------
def centred_reference(x):
    """x minus its mean: exactly zero in float64 where every x is equal."""
    return x - jnp.mean(x, axis=-1, keepdims=True)


def centred_with_noise(x):
    # float32's honest rounding: the mean of equal values, computed as a sum
    # divided, is not always the value itself.
    return x - jnp.sum(x, axis=-1, keepdims=True) * (1.0 / x.shape[-1])


def centred_off(x):
    return centred_with_noise(x) + 1e-3 * jnp.abs(x)


def test_an_exactly_zero_oracle_is_compared_at_the_inputs_scale():
    args, out, sizes = (Arg("x", ("b", "n")),), (("b", "n"),), {"b": 4, "n": 7}
    tol = Ulps(at_value=4, at_scale=4)
    right = spec_of(centred_with_noise, centred_reference, args, out, sizes, tolerance=tol)
    wrong = spec_of(centred_off, centred_reference, args, out, sizes, tolerance=tol)
    message = assert_caught(wrong, right, "hard-equal")
    assert "e+3" not in message  # ulps counted at the inputs' scale, not at zero


def test_the_zero_floor_applies_only_to_an_all_zero_oracle():
    from jax_ladder.opcheck.compare import assert_close

    want = np.zeros(4)
    assert_close(np.full(4, 1e-8, np.float32), want, Ulps(at_value=4), scale=1.0)
    with pytest.raises(AssertionError):
        assert_close(np.full(4, 1e-8, np.float32), want, Ulps(at_value=4))  # no scale: exact
    with pytest.raises(AssertionError):
        # One element nonzero: the zeros are held at their own values, as before.
        assert_close(
            np.array([1e-8, 0, 0, 1], np.float32), np.array([0, 0, 0, 1.0]), Ulps(4), scale=1.0
        )


# --- Dtypes: every cell in each declared dtype ---------------------------------
def rms_in_float32(x):
    """Right in any dtype: the sum of squares accumulated in float32, the
    result rounded once."""
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (x32 * scale).astype(x.dtype)


def rms_in_input_dtype(x):
    """Right in float32, wrong in bfloat16: each partial sum of squares is
    rounded to the input's dtype (a running sum kept in x.dtype)."""
    total = jnp.cumsum(x * x, axis=-1, dtype=x.dtype)[..., -1:]
    scale = jax.lax.rsqrt(total.astype(jnp.float32) / x.shape[-1] + 1e-6)
    return (x.astype(jnp.float32) * scale).astype(x.dtype)


def test_an_op_that_accumulates_in_bfloat16_fails_the_bfloat16_cells():
    sizes = {"b": 8, "n": 64}
    ops = {}
    for op in (rms_in_float32, rms_in_input_dtype):
        ops[op] = spec_of(
            op, rms_in_float32, ROWS, (("b", "n"),), sizes, dtypes=("float32", "bfloat16")
        )
    wrong, right = ops[rms_in_input_dtype], ops[rms_in_float32]
    assert "eager@bfloat16" in cell_names(wrong)
    assert "check-grads-1@bfloat16" not in cell_names(wrong)  # float64 whatever the dtype
    # Again in bfloat16: the cells whose numbers the dtype decides, not the
    # ones that only move them (batching, sharding, control flow, lowering).
    again = {c.partition("@")[0] for c in cell_names(wrong) if c.endswith("@bfloat16")}
    assert {"eager", "jit", "grad-x", "vjp", "size-n-1", "size-b-0", "hard-nonfinite"} <= again
    moved_only = {
        "vmap-of-grad",
        "vmap-nested",
        "scan",
        "jit-auto-b",
        "lower-cpu",
        "grad-grad-explicit-b",
    }
    assert moved_only <= set(cell_names(wrong))
    assert not moved_only & again
    assert outcome(wrong, "eager").outcome == "passed"  # float32: right
    message = assert_caught(wrong, right, "eager@bfloat16")
    assert "of bfloat16" in message
    assert message.startswith("[eager@bfloat16]")


def test_a_refusal_covers_its_cell_in_every_dtype():
    spec = spec_of(
        rms_in_float32,
        rms_in_float32,
        ROWS,
        (("b", "n"),),
        {"b": 8, "n": 16},
        dtypes=("float32", "bfloat16"),
        refuse={"jvp": Refuse(ValueError, "no", "no forward mode")},
    )
    from jax_ladder.opcheck.conformance import refusal

    assert refusal(spec, "jvp@bfloat16") is spec.refuse["jvp"]
    assert refusal(spec, "linearize@bfloat16") is spec.refuse["jvp"]
    assert spec.dtype == "float32"
    assert spec.cell_dtypes == ("float32", "bfloat16")


# --- Complex outputs: in ulps of each component ---------------------------------
def test_complex_results_are_compared_in_ulps_of_each_component():
    from jax_ladder.opcheck.compare import assert_close

    want = np.array([1.0 + 2.0j, -3.0 + 0.5j])
    one_ulp = np.array([np.nextafter(np.float32(1.0), 2) + 2.0j, -3.0 + 0.5j], np.complex64)
    assert_close(one_ulp, want, Ulps(at_value=1))  # was compared bit for bit: failed
    off = np.array([1.0 + 2.001j, -3.0 + 0.5j], np.complex64)
    with pytest.raises(AssertionError, match="imaginary part"):
        assert_close(off, want, Ulps(at_value=4))


# --- A platform's widening follows the kinds of operation, not the platform ----
def test_a_tpu_widens_only_results_of_operations_it_does_not_round_as_ieee():
    from jax_ladder.opcheck.compare import assert_close
    from jax_ladder.opcheck.conformance import operation_kinds

    want = np.array([1.0, 3.0])
    ten_ulps = (want * (1 + 10 * np.finfo(np.float32).eps)).astype(np.float32)
    # Adds and multiplies only: IEEE's on a TPU too, so Ulps(4) means 4.
    exact = spec_of(
        lambda x: 3 * x + x * x, lambda x: 3 * x + x * x, (Arg("x", ("n",)),), (("n",),), {"n": 8}
    )
    assert operation_kinds(exact) == frozenset()
    with pytest.raises(AssertionError, match="ulps of float32"):
        assert_close(ten_ulps, want, Ulps(4), platform="tpu", kinds=operation_kinds(exact))
    # A tanh: a TPU's is not correctly rounded, and the count widens there only.
    curved = spec_of(jnp.tanh, jnp.tanh, (Arg("x", ("n",)),), (("n",),), {"n": 8})
    assert operation_kinds(curved) == frozenset({"transcendental"})
    assert_close(ten_ulps, want, Ulps(4), platform="tpu", kinds=operation_kinds(curved))
    with pytest.raises(AssertionError):
        assert_close(ten_ulps, want, Ulps(4), platform="cpu", kinds=operation_kinds(curved))


def test_an_op_whose_computation_no_jaxpr_shows_is_widened_for_every_kind():
    """A TPU v5e failed every export cell by 199 to 5e4 ulps: the artifact's
    jaxpr holds call_exported, not its tanh and sums, so its kinds read as
    none and nothing was widened. A serialized module, a host callback or a
    primitive of the user's own: any kind (None)."""
    from jax_ladder.opcheck.conformance import operation_kinds

    x = jnp.ones(8, jnp.float32)
    exported = jax.export.export(jax.jit(jnp.tanh))(x)

    def callback(v):
        return jax.pure_callback(np.tanh, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    mine = Primitive("my_tanh")
    mine.def_impl(np.tanh)
    mine.def_abstract_eval(lambda v: core.ShapedArray(v.shape, v.dtype))
    mlir.register_lowering(mine, mlir.lower_fun(jnp.tanh, multiple_results=False))
    for op in (exported.call, callback, mine.bind):
        spec = spec_of(op, jnp.tanh, (Arg("x", ("n",), differentiable=False),), (("n",),), {"n": 8})
        assert operation_kinds(spec) is None, op
    # A jaxpr that shows its tanh is read as before.
    shown = spec_of(jax.jit(jnp.tanh), jnp.tanh, (Arg("x", ("n",)),), (("n",),), {"n": 8})
    assert operation_kinds(shown) == frozenset({"transcendental"})


# --- Ill-conditioned cells: held to the reference's own error, no blanket pass --
def rms_with_sloppy_backward(x):
    """The RMS normalisation, its backward off by 1e-4 of the cotangent."""

    @jax.custom_vjp
    def rms(x):
        return normalized_reference(x)

    def fwd(x):
        y, pullback = jax.vjp(normalized_reference, x)
        return y, pullback

    def bwd(pullback, g):
        return (pullback(g)[0] + 1e-4 * g,)

    rms.defvjp(fwd, bwd)
    return rms(x)


def test_an_ill_conditioned_cell_holds_the_op_to_the_references_own_error():
    # A row of one element: the gradient cancels, and the plain-JAX reference
    # is itself thousands of ulps off, so the declared tolerance alone fails a
    # right op there; declared ill-conditioned, a right op passes and one far
    # worse than the reference still fails.
    args, out, sizes = ROWS, (("b", "n"),), {"b": 8, "n": 16}
    tol = {"tolerance": Ulps(at_value=6), "gradient_tolerance": Ulps(at_value=0, at_scale=4)}
    plain = spec_of(normalized_reference, normalized_reference, args, out, sizes, **tol)
    assert outcome(plain, "size-n-1").outcome == "failed"
    why = {"size-n-1": "a row of one element: its gradient cancels"}
    right = spec_of(
        normalized_reference, normalized_reference, args, out, sizes, ill_conditioned=why, **tol
    )
    wrong = spec_of(
        rms_with_sloppy_backward, normalized_reference, args, out, sizes, ill_conditioned=why, **tol
    )
    assert_caught(wrong, right, "size-n-1")


def softmax_weighted_mean(x):
    return jnp.sum(jax.nn.softmax(x, axis=-1) * x, axis=-1)


def softmax_weighted_mean_without_max(x):
    e = jnp.exp(x)
    return jnp.sum(e / jnp.sum(e, axis=-1, keepdims=True) * x, axis=-1)


def test_declaring_a_hard_cell_ill_conditioned_hides_no_missing_max_subtraction():
    args, out, sizes = ROWS, (("b",),), {"b": 4, "n": 8}
    why = {"hard-*": "softmax at exp's edge"}
    right = spec_of(
        softmax_weighted_mean, softmax_weighted_mean, args, out, sizes, ill_conditioned=why
    )
    wrong = spec_of(
        softmax_weighted_mean_without_max,
        softmax_weighted_mean,
        args,
        out,
        sizes,
        ill_conditioned=why,
    )
    assert_caught(wrong, right, "hard-exp-edge")


# --- Partly manual shard_maps: a split row, an Explicit free axis ---------------
def on_eight_devices(test):
    """Whether the test ran itself in a fresh process with 8 simulated CPU
    devices (its cells' 2x2 mesh needs 4; JAX's device count is fixed once it
    starts): True there, so the caller returns; False where this process has
    them and the test runs here."""
    if len(jax.devices("cpu")) >= 4:
        return False
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    command = [sys.executable, "-m", "pytest", f"{__file__}::{test.__name__}", "-q", "-n", "0"]
    command += ["-p", "no:cacheprovider"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return True


def softmax_rows_reference(x):
    return jax.nn.softmax(x, axis=-1)


def softmax_partitioned(rows_whole_in_shard_map):
    """Row softmax of x (b, n) by custom_partitioning, each device's block with
    its rows whole (n replicated). Inside a shard_map manual over "x" the
    partitioner hands partition an XLA tiling over the free axis ("y" of the
    cells' 2x2 mesh) instead of a NamedSharding: read as a spec there, rows
    are whole only if rows_whole_in_shard_map (the FFI template's _on_free_axes);
    else the block is used as it comes, each device normalising its piece."""
    from jax._src.sharding_impls import parse_flatten_op_sharding
    from jax.experimental.custom_partitioning import custom_partitioning
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    @custom_partitioning
    def call(x):
        return softmax_rows_reference(x)

    def partition(mesh, arg_shapes, result_shape):
        sharding = arg_shapes[0].sharding
        if isinstance(sharding, NamedSharding):
            mesh, rows = sharding.mesh, (*sharding.spec, None)[0]
            layout = NamedSharding(mesh, P(rows, None))
        elif rows_whole_in_shard_map:
            devices = sorted(sharding.device_set, key=lambda d: d.id)[:2]
            mesh = Mesh(np.array(devices), ("y",))
            (spec,) = parse_flatten_op_sharding(sharding._to_xla_hlo_sharding(2), mesh)
            layout = NamedSharding(mesh, P((*spec, None)[0], None))
        else:
            layout = sharding
        return mesh, softmax_rows_reference, layout, (layout,)

    call.def_partition(partition, sharding_rule="b n -> b n", need_replication_factors=("n",))

    @jax.custom_vjp
    def op(x):
        return call(x)

    def fwd(x):
        y = call(x)
        return y, y

    def bwd(y, g):
        return (y * (g - jnp.sum(g * y, axis=-1, keepdims=True)),)

    op.defvjp(fwd, bwd)
    return op


def softmax_spec(op):
    from jax_ladder.opcheck import Collectives

    # Both gather split rows whole, where the reference all-reduces partial sums.
    gathered = Collectives(
        "rows gathered whole",
        forward={"all-gather": 1},
        gradient={"all-gather": 1, "all-reduce": 1},
    )
    extra = {"jit-auto-n": gathered, "shard-map-partial-b-free-n": gathered}
    args, out = (Arg("x", ("b", "n")),), (("b", "n"),)
    return spec_of(
        op,
        softmax_rows_reference,
        args,
        out,
        {"b": 8, "n": 8},
        shard_map_axes=("b",),
        extra_collectives=extra,
    )


def test_a_row_split_over_a_shard_maps_free_axis_reaches_the_ops_rule():
    if on_eight_devices(test_a_row_split_over_a_shard_maps_free_axis_reaches_the_ops_rule):
        return
    # Measured: the twins' outcomes differ in this cell alone (both fail the
    # cells custom_partitioning cannot run: vmap, second order, explicit axes).
    wrong, right = softmax_partitioned(False), softmax_partitioned(True)
    cell = "shard-map-partial-b-free-n"
    message = assert_caught(softmax_spec(wrong), softmax_spec(right), cell)
    assert "output 0" in message


def doubled_reference(x):
    return x + x


def doubled_auto(skip_manual):
    """x + x with the operand's Explicit mesh axes made Auto for the call
    (jax.sharding.auto_axes, as the Pallas template's per_shard), where it
    has any, and, unless skip_manual, its Manual ones too: JAX refuses those."""
    from jax.sharding import AxisType

    def op(x):
        mesh = jax.typeof(x).sharding.mesh
        kinds = (AxisType.Explicit,) if skip_manual else (AxisType.Explicit, AxisType.Manual)
        axes = tuple(a for a, t in zip(mesh.axis_names, mesh.axis_types, strict=True) if t in kinds)
        if AxisType.Explicit not in mesh.axis_types:
            return x + x
        out = jax.typeof(x).sharding
        return jax.sharding.auto_axes(lambda x: x + x, axes=axes, out_sharding=out)(x)

    return op


def test_an_explicit_free_axis_in_a_partly_manual_shard_map():
    if on_eight_devices(test_an_explicit_free_axis_in_a_partly_manual_shard_map):
        return
    args, out = (Arg("x", ("b", "n")),), (("b", "n"),)

    def spec(op):
        return spec_of(op, doubled_reference, args, out, {"b": 8, "n": 8}, shard_map_axes=("b",))

    wrong, right = spec(doubled_auto(False)), spec(doubled_auto(True))
    for cell in ("shard-map-partial-b", "jit-explicit-b", "vmap-sharded-new-axis"):
        assert outcome(wrong, cell).outcome == "passed", cell
    message = assert_caught(wrong, right, "shard-map-partial-explicit-b")
    assert "Manual" in message


def row_max_scaled_reference(x):
    return x * jnp.max(x, axis=1, keepdims=True)


def scaled_by_row_max(pick):
    """x * each row's largest entry (b, n): a custom_vjp whose forward is a
    custom_jvp, so only second order runs that rule, which gathers each row's
    winner from the tangent with pick (the custom-partitioning template's
    _pick)."""
    from jax.sharding import AxisType

    @jax.custom_jvp
    def top(x):
        return jnp.max(x, axis=1, keepdims=True)

    @top.defjvp
    def top_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        explicit = AxisType.Explicit in jax.typeof(t).sharding.mesh.axis_types
        return top(x), pick(t, jnp.argmax(x, axis=1)[:, None], explicit)

    @jax.custom_vjp
    def op(x):
        return x * top(x)

    def fwd(x):
        return op(x), (x, top(x))

    def bwd(residuals, g):
        x, m = residuals
        winner = jax.nn.one_hot(jnp.argmax(x, axis=1), x.shape[1], dtype=x.dtype)
        return (g * m + jnp.sum(g * x, axis=1, keepdims=True) * winner,)

    op.defvjp(fwd, bwd)
    return op


def pick_by_index(a, indices, explicit):
    """The winners by advanced indexing, laid out like the indices: under
    vmap of a batch split over an Explicit mesh axis, outside jax.set_mesh,
    JAX fails ("Resource axis ... not found in mesh: ()")."""
    rows = jnp.arange(a.shape[0])[:, None]
    return a.at[rows, indices].get(out_sharding=jax.typeof(indices).sharding if explicit else None)


def pick_along_axis(a, indices, explicit):
    from jax.sharding import NamedSharding

    layout = NamedSharding(jax.typeof(a).sharding.mesh, jax.typeof(indices).sharding.spec)
    return jnp.take_along_axis(a, indices, axis=1, out_sharding=layout if explicit else None)


def test_second_order_of_a_batch_split_over_an_explicit_mesh():
    # Measured: the twins' outcomes differ in this cell alone of the matrix.
    if on_eight_devices(test_second_order_of_a_batch_split_over_an_explicit_mesh):
        return
    args, out = (Arg("x", ("b", "n")),), (("b", "n"),)

    def spec(op):
        sizes = {"b": 8, "n": 8}
        return spec_of(op, row_max_scaled_reference, args, out, sizes, shard_map_axes=("b",))

    wrong, right = spec(scaled_by_row_max(pick_by_index)), spec(scaled_by_row_max(pick_along_axis))
    for cell in ("grad-grad-explicit-b", "grad-grad-explicit-vmap-b", "vmap-sharded-new-axis"):
        assert outcome(wrong, cell).outcome == "passed", cell
    message = assert_caught(wrong, right, "grad-grad-explicit-vmap-new-axis")
    assert "not found in mesh" in message
