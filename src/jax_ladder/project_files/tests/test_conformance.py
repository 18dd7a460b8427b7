"""Every cell of the conformance matrix (tests/conformance/) for the op
declared in tests/op_spec.py, and the README's table of them."""

import os
import re
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import support_table
from compare import PLATFORM_BITS, PLATFORM_WORST, WORST, Ulps, assert_close, platform_scale
from conformance import (
    Arg,
    Collectives,
    OpSpec,
    Refuse,
    assert_as_declared,
    cell_names,
    float32_matmuls_not_highest,
    matmuls,
    narrowing_matmuls,
    run_cell,
    unknown_refusals,
)
from devices import cpu_subprocess_env, mesh_devices
from op_spec import SPEC


@pytest.mark.parametrize("cell", cell_names(SPEC))
def test_cell(cell, rng):
    run_cell(SPEC, cell, rng)


# XLA's float32 matmul is the platform's choice unless the program asks:
# TensorFloat-32 on NVIDIA GPUs (about 1e4 float32 ulps off). Every float32 dot
# of the reference, the oracle's formula, and of the op outside its kernels
# asks for HIGHEST, forward and gradient, so a CPU run checks the GPU's numbers.
def test_reference_matmuls_are_highest(rng):
    assert float32_matmuls_not_highest(SPEC.reference, SPEC, rng) == []


def test_op_matmuls_are_highest(rng):
    assert float32_matmuls_not_highest(SPEC.op, SPEC, rng) == []


# The reference run on the oracle's float64 inputs asks for no narrower result
# (float64 x float64 -> float32 is a GEMM no GPU library has): its dtypes
# follow its inputs.
def test_reference_keeps_float64(rng):
    assert narrowing_matmuls(SPEC.reference, SPEC, rng) == []


def test_the_matmul_checks_see_what_they_look_for():
    """Negative controls: the checks above find a matmul at the platform's
    default precision, in a jaxpr and inside an exported artifact, and a
    float64 matmul with a float32 result."""
    a = jnp.ones((4, 8), jnp.float32)
    default = jax.jit(lambda a: a @ a.T)
    artifact = export.deserialize(export.export(default)(a).serialize())
    highest = partial(jnp.matmul, precision=lax.Precision.HIGHEST)
    assert [m.precision for m in matmuls(default, a)] == ["DEFAULT"]
    assert [m.precision for m in matmuls(artifact.call, a)] == ["DEFAULT"]
    assert [m.precision for m in matmuls(lambda a: highest(a, a.T), a)] == ["HIGHEST"]
    narrow = partial(jnp.matmul, preferred_element_type=jnp.float32)
    (found,) = matmuls(lambda a: narrow(a, a.T), a.astype(jnp.float64))
    assert found.narrows


def test_the_lower_check_sees_a_program_of_another_platform(rng):
    """Negative control: an op that computes otherwise on a GPU, with no
    marker declaring its own GPU implementation, fails lower-cuda (the cells
    run here see only the CPU's program)."""

    def op(x):
        return lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)

    exact = Ulps(at_value=4)
    spec = OpSpec("op", op, jnp.sin, None, (Arg("x", ("n",)),), (("n",),), {"n": 4}, exact, exact)
    run_cell(spec, "lower-cpu", rng)
    with pytest.raises(AssertionError, match="differs from the CPU's"):
        run_cell(OpSpec(**{**spec.__dict__, "platforms": {"cuda": ""}}), "lower-cuda", rng)


# Negative controls of the comparison itself: each planted fault fails, and
# its message says where.
EXACT = Ulps(at_value=4.0)


@pytest.fixture
def unrecorded():
    """The planted faults' errors stay out of the run's worst-error record."""
    seen, seen_on_platforms = dict(WORST), dict(PLATFORM_WORST)
    yield
    WORST.update(seen)
    PLATFORM_WORST.clear()
    PLATFORM_WORST.update(seen_on_platforms)


@pytest.mark.parametrize(
    "got, want", [(np.nan, np.inf), (-np.inf, np.inf), (np.inf, np.nan), (1.0, np.inf)]
)
def test_a_non_finite_value_must_be_the_oracles_exactly(unrecorded, got, want):
    with pytest.raises(AssertionError, match=r"at index \(1,\).*non-finite"):
        assert_close(np.float32([1.0, got]), np.array([1.0, want]), EXACT)
    assert_close(np.float32([np.nan, np.inf, -np.inf]), np.array([np.nan, np.inf, -np.inf]), EXACT)


@pytest.mark.parametrize(("platform", "dtype"), sorted(PLATFORM_BITS))
def test_a_platforms_declared_arithmetic_widens_its_results_tolerance_only(
    unrecorded, platform, dtype
):
    """A result computed on a platform of compare.PLATFORM_BITS (a TPU's
    emulated float64) may be off by that many more ulps; the same error in a
    result computed on the CPU fails."""
    want = np.array([1.0, 3.0])
    ulps = EXACT.at_value * platform_scale(dtype, platform) / 2
    got = (want + ulps * np.finfo(dtype).eps * np.array([1.0, 2.0])).astype(dtype)
    assert_close(got, want, EXACT, platform=platform)
    assert PLATFORM_WORST[f"{platform}/{dtype}"][0] > 1.0  # beyond IEEE's tolerance
    with pytest.raises(AssertionError, match=rf"ulps of {dtype} at index"):
        assert_close(got, want, EXACT, platform="cpu")


def unary(op, reference, axes=("n",), sizes=None, out=None):
    """The declaration of a one-argument op, for the negative controls (out:
    its output's axes, where not the argument's)."""
    x = Arg("x", axes)
    sizes = sizes or {"n": 8}
    return OpSpec("op", op, reference, None, (x,), (out or axes,), sizes, EXACT, EXACT)


def test_the_hard_zeros_cell_tells_the_signs_of_infinity_apart(unrecorded, rng):
    """1/|x| is +inf at -0.0, where 1/x is -inf."""
    spec = unary(lambda x: 1 / jnp.abs(x), lambda x: 1 / x)
    with pytest.raises(
        AssertionError, match=r"^\[hard-zeros\] eager, output 0: got inf, want -inf"
    ):
        run_cell(spec, "hard-zeros", rng)


def product(x, y):
    return x * y


def planted(x, y):
    """x * y, one element off."""
    return (x * y).at[2, 1].add(1.0)


def row_sums(fn):
    return lambda x, y: jnp.sum(fn(x, y), axis=1)


@pytest.mark.parametrize(
    "op, reference, outputs, inputs",
    [
        (planted, product, ("n", "m"), r"x = \S+, y = \S+"),
        (row_sums(planted), row_sums(product), ("n",), r"x\[2, :\], y\[2, :\]"),
    ],
    ids=["elementwise", "rows"],
)
def test_a_failure_names_its_cell_check_element_inputs_and_tolerance(
    unrecorded, rng, op, reference, outputs, inputs
):
    args = (Arg("x", ("n", "m")), Arg("y", ("n", "m")))
    spec = OpSpec("op", op, reference, None, args, (outputs,), {"n": 4, "m": 3}, EXACT, EXACT)
    with pytest.raises(AssertionError) as error:
        run_cell(spec, "jit", rng)
    line = str(error.value).splitlines()[0]
    index = ", ".join(["2", "1"][: len(outputs)]) + ("," if len(outputs) == 1 else "")
    pattern = (
        rf"\[jit\] jit, output 0: off by \S+ ulps of float32 at index \({index}\) \({inputs}\); "
        r"allowed \S+ ulps? of float32: got \S+, want \S+"
    )
    assert re.fullmatch(pattern, line), line
    tolerance = str(error.value).splitlines()[1]
    assert tolerance.startswith("  tolerance: Ulps(at_value=4.0, at_scale=0.0) = 4 ulps"), tolerance


def test_a_wrong_gradient_names_its_argument_and_check_grads_its_order(unrecorded, rng):
    @jax.custom_vjp
    def op(x):
        return jnp.sin(x)

    op.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (2 * g * jnp.cos(x),))
    forward = Refuse(TypeError, "forward-mode", "no forward mode")
    spec = OpSpec(**{**unary(op, jnp.sin).__dict__, "refuse": {"jvp": forward}})
    with pytest.raises(AssertionError, match=r"^\[grad-x\] grad, gradient of x: .* at index"):
        run_cell(spec, "grad-x", rng)
    with pytest.raises(
        AssertionError, match=r"^\[check-grads-1\] check_grads\(order=1, modes=\['rev'\]\)"
    ):
        run_cell(spec, "check-grads-1", rng)


def test_declared_collectives_are_counted_exactly(unrecorded, rng):
    """A declaration that says the op gathers where it does not fails, and so
    does an op that gathers where JAX refuses the reference (nothing declared)
    along a shard_map axis."""
    declared = {"jit-auto-n": Collectives("a gather", forward={"all-gather": 1})}
    spec = OpSpec(**{**unary(jnp.sin, jnp.sin).__dict__, "extra_collectives": declared})
    with pytest.raises(
        AssertionError,
        match=r"^\[jit-auto-n\] forward program: collectives \{\}, declared \{'all-gather': 1\}",
    ):
        run_cell(spec, "jit-auto-n", rng)

    def gathered_sort(x):
        """Sorted rows: gathered first, where x is split."""
        mesh = jax.typeof(x).sharding.mesh
        if not mesh.empty:
            x = jax.sharding.reshard(
                x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            )
        return lax.sort(x)

    # JAX refuses lax.sort along a split axis (ShardingTypeError). Not top_k:
    # JAX 0.12.1 takes top_k along a split axis, and gathers it. Held where n
    # is a shard_map axis; on any other axis the gather is a cost, noted.
    spec = unary(gathered_sort, lax.sort, ("b", "n"), {"b": 4, "n": 8})
    run_cell(spec, "jit-explicit-n", rng)
    held = OpSpec(**{**spec.__dict__, "shard_map_axes": ("n",)})
    with pytest.raises(AssertionError, match="where JAX refuses the reference"):
        run_cell(held, "jit-explicit-n", rng)


def test_results_are_held_to_their_abstract_result(unrecorded, rng):
    """Negative controls: an op that computes on the host when called
    eagerly (float64, where its trace declares float32: the float64 oracle
    accepts the values) fails the eager cell; an op whose declared result
    is not the reference's (a float16 result_shape_dtypes of an FFI call,
    say, whose values are within float16's ulps) fails it too; and a result
    placed otherwise than its type says is seen."""

    def on_host(x):
        if isinstance(x, jax.core.Tracer):
            return jnp.sin(x)
        return np.sin(np.asarray(x, np.float64))

    run_cell(unary(on_host, jnp.sin), "jit", rng)
    with pytest.raises(AssertionError, match=r"^\[eager\] result 0: computed float64\[8\], but"):
        run_cell(unary(on_host, jnp.sin), "eager", rng)
    narrow = unary(lambda x: jnp.sin(x).astype(jnp.float16), jnp.sin)
    run_cell(narrow, "jit", rng)  # the values are within float16's ulps
    with pytest.raises(AssertionError, match=r"^\[eager\] the op's abstract result .*float16"):
        run_cell(narrow, "eager", rng)
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Explicit,), devices=mesh_devices(4))
    split = jax.device_put(jnp.ones(8), NamedSharding(mesh, P("x")))
    typed = jax.eval_shape(jnp.sin, split)
    assert_as_declared(jnp.sin(split), typed)
    gathered = jax.device_put(jnp.ones(8), NamedSharding(mesh, P()))
    with pytest.raises(AssertionError, match=r"result 0: placed P(artitionSpec)?\(\) on"):
        assert_as_declared(gathered, typed)


def test_two_runs_must_give_the_same_bits_unless_declared(unrecorded, rng):
    """Negative control: an op one ulp off on every other run (within its
    tolerance) fails the jit cell, unless the platform that computes it is
    declared nondeterministic: the default device's, which a project may pin
    to the CPU on a TPU host (a waiver for another platform waives nothing)."""
    runs = []

    def wobbly(x):
        runs.append(None)
        y = np.sin(np.asarray(x))
        return np.nextafter(y, np.inf).astype(y.dtype) if len(runs) % 2 else y

    def op(x):
        return jax.pure_callback(wobbly, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    spec = unary(op, jnp.sin)
    with pytest.raises(AssertionError, match=r"^\[jit\] jit, result 0: \d+ of 8 elements differ"):
        run_cell(spec, "jit", rng)
    here = next(iter(jnp.zeros(()).devices())).platform
    elsewhere = "gpu" if here != "gpu" else "tpu"
    why = "the host's callback varies its last bit"
    with pytest.raises(AssertionError, match=r"^\[jit\] jit, result 0: \d+ of 8 elements differ"):
        run_cell(OpSpec(**{**spec.__dict__, "nondeterministic": {elsewhere: why}}), "jit", rng)
    run_cell(OpSpec(**{**spec.__dict__, "nondeterministic": {here: why}}), "jit", rng)


def test_donations_are_held_to_the_compiled_aliases(unrecorded, rng):
    """Negative control: an op that donates its own arguments (a jit with
    donate_argnums inside it) consumes its caller's arrays, which the eager
    cell sees. And a transposed result, which XLA aliases to the donated
    input of the same size (not shape), passes jit-donate: what is consumed
    is read from the compiled program, not predicted."""
    spec = unary(jax.jit(jnp.sin, donate_argnums=0), jnp.sin)
    with pytest.raises(AssertionError, match=r"^\[eager\] eager: arguments \[0\] consumed"):
        run_cell(spec, "eager", rng)
    transposed = unary(jnp.transpose, jnp.transpose, ("n", "m"), {"n": 4, "m": 8}, ("m", "n"))
    run_cell(transposed, "jit-donate", rng)


def test_every_declared_refusal_names_a_cell():
    assert unknown_refusals(SPEC) == []


def test_readme_support_table_is_current():
    if not support_table.README.is_file():  # tests run against an installed wheel
        pytest.skip("no README.md beside the tests")
    block = support_table.current_block(support_table.README.read_text())
    if jax.default_backend() == "cpu":
        rendered = support_table.render(SPEC)
    else:
        # The table is the CPU's, where the README is written: a declaration may
        # refuse a cell only where it runs interpreted (tests/op_spec.py).
        rendered = subprocess.run(
            [sys.executable, "-c", RENDER],
            cwd=support_table.TESTS,
            # This process's own import path, absolute: a relative PYTHONPATH
            # (PYTHONPATH=src) would not resolve from tests/.
            env=cpu_subprocess_env(PYTHONPATH=os.pathsep.join(sys.path)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.rstrip("\n")
    assert block == rendered, "stale: run `python tests/support_table.py`"


RENDER = "import support_table; from op_spec import SPEC; print(support_table.render(SPEC))"
