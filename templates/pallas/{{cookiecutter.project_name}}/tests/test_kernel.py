"""The Pallas kernel against the plain-JAX reference, in interpret mode on any
machine; lowered for the real target on this host; run natively where the
target exists. Target-specific details live in tests/target.py."""

{% if cookiecutter.backend == "tpu" -%}
import re

{% endif -%}
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from {{ cookiecutter.package_name }} import BACKWARD, {% if cookiecutter.backend == "tpu" %}block_table, {% endif %}kernel

# isort: split
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }} as op
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}_reference

import target
from compare import assert_close, at_platform, platform_of
from op_spec import SPEC
from oracle import (
    BFLOAT16_GRADIENTS,
    BFLOAT16_VALUES,
    GRADIENTS,
    VALUES,
    {{ cookiecutter.op_name }}_f64,
    {{ cookiecutter.op_name }}_vjp_f64,
)

needs_target = pytest.mark.skipif(not target.present(), reason=f"needs a {target.NAME} device")
# Ragged shapes: edges that do not divide the default 128 blocks, on every axis.
SHAPES = [(1, 1, 1), (8, 128, 128), (256, 256, 256), (200, 300, 130), (129, 257, 383)]
# No square shape for gradients: it would hide a transposed operand. The
# ragged one is one past a 128 block on m and k and ragged on n, so each of the
# backward's matmuls has a ragged contraction (over n for da, m for db).
GRADIENT_SHAPES = [(1, 1, 1), (8, 128, 128), (129, 257, 130)]
DTYPES = [jnp.float32, jnp.bfloat16]


# JAX's Pallas TPU interpreter with two simulated cores (the strict settings)
# failed on a TPU VM's host (one TPU v5e, JAX 0.10.2, 2026-12-06): a core's
# thread found the interpreter's shared memory gone ("assert _shared_memory is
# not None", or KeyError ('vmem', ..., core 1)), so tiles stayed NaN and no
# race was reported; the cause (the TPU backend beside it, or the host's 13
# cores) is not established. On CPU hosts, CI's included, these tests are the
# race detector's guard; on the chip the kernel runs natively in the others.
INTERPRETER_ON_A_TPU_HOST = pytest.mark.xfail(
    jax.default_backend() == "tpu",
    reason="the Pallas TPU interpreter's two-core mode fails on a TPU host (see above)",
    strict=False,
)


def {{ cookiecutter.op_name }}(*args, **kwargs):
    """The op, made to run the kernel: "auto" would run the plain-JAX
    reference on a host without the kernel's hardware (test_composed.py
    tests that choice)."""
    return op(*args, implementation="kernel", **kwargs)


def on_its_platform(ulps, result):
    """ulps, widened for what the kernel's float32 matmuls keep of their inputs
    on the platform the result was computed on (tests/op_spec.py's
    matmul_inputs: Mosaic GPU's WGMMA multiplies float32 as TensorFloat-32)."""
    return at_platform(ulps, SPEC.matmul_inputs, platform_of(result))


def operands(rng, shape, dtype):
    """a, b and bias on a CPU device (on_cpu)."""
    m, k, n = shape
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)  # keeps z = O(1)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    return on_cpu(a, b, bias)


def on_cpu(*arrays):
    """arrays on a CPU device, where the interpreted kernel then runs, and the
    reference it is compared with, whatever this host's default device: on a
    host with the kernel's hardware that is the accelerator, and there the
    interpreter (replaying the kernel in XLA ops, or Pallas's TPU interpreter
    with its host callbacks) is not what these tests check (on a TPU it
    returned NaN, missed the race and multiplied at the TPU's precision)."""
    return jax.device_put(arrays, jax.devices("cpu")[0])


def natively(*arrays):
    """arrays on the default device: the kernel's hardware, where a test
    marked needs_target runs."""
    return jax.device_put(arrays, jax.devices()[0])


def vjp(f, **kwargs):
    """(a, b, bias, g) -> the cotangents of a, b and bias for output cotangent g."""

    def cotangents(a, b, bias, g):
        _, f_vjp = jax.vjp(lambda *args: f(*args, **kwargs), a, b, bias)
        return f_vjp(g)

    return cotangents


@pytest.fixture
def strict():
    """The strict interpreter's settings (tests/target.py). A race raises inside
    the interpreter, which then needs its state reset before the next kernel."""
    yield target.STRICT
    target.reset_strict()


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_match_reference(rng, shape, dtype):
    args = operands(rng, shape, dtype)
    tolerance = VALUES if dtype == jnp.float32 else BFLOAT16_VALUES
    got = {{ cookiecutter.op_name }}(*args, interpret=True)
    assert_close(got, {{ cookiecutter.op_name }}_reference(*args), on_its_platform(tolerance, got))


OTHER_BLOCKS = [(256, 128, 128), (128, 256, 128), (128, 128, 256)]


def valid_natively(blocks, shape):
    """Whether the op accepts these blocks for the native kernel (its own
    checks, forward and backward: some backends' hardware limits refuse
    blocks the interpreter runs, such as Mosaic GPU's registers)."""
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in (shape[:2], shape[1:], shape[2:])]
    sizes = dict(zip(("block_m", "block_n", "block_k"), blocks, strict=True))
    try:
        jax.eval_shape(lambda *a: {{ cookiecutter.op_name }}(*a, **sizes, interpret=False), *args)
    except ValueError:
        return False
    return True


@pytest.fixture(params=["this-host", "gpu-host"])
def host(request, monkeypatch):
    """This host as it is, and as a host whose default platform is the GPU:
    a kernel interpreted on CPU devices is the interpreter's, whatever the
    host (on a host with a GPU, its blocks once failed the native checks)."""
    if request.param == "gpu-host" and hasattr(kernel, "default_export_platform"):
        monkeypatch.setattr(kernel, "default_export_platform", lambda: "cuda")
    return request.param


@pytest.mark.parametrize("blocks", OTHER_BLOCKS, ids=str)
def test_other_block_sizes(rng, blocks, host):
    """Interpreted, on CPU devices: any blocks the tiling rules allow."""
    block_m, block_n, block_k = blocks
    cpu = jax.devices("cpu")[0]
    args = jax.device_put(operands(rng, (200, 300, 390), jnp.float32), cpu)
    got = {{ cookiecutter.op_name }}(*args, block_m=block_m, block_n=block_n, block_k=block_k, interpret=True)
    assert_close(got, {{ cookiecutter.op_name }}_reference(*args), on_its_platform(VALUES, got))


@needs_target
@pytest.mark.parametrize(
    "blocks", [b for b in OTHER_BLOCKS if valid_natively(b, (200, 300, 390))], ids=str
)
def test_other_block_sizes_natively(rng, blocks):
    """Natively, the blocks the op accepts on its hardware."""
    block_m, block_n, block_k = blocks
    args = natively(*operands(rng, (200, 300, 390), jnp.float32))
    got = {{ cookiecutter.op_name }}(*args, block_m=block_m, block_n=block_n, block_k=block_k, interpret=False)
    assert_close(got, {{ cookiecutter.op_name }}_reference(*args), on_its_platform(VALUES, got))


def test_accumulates_in_float32():
    """bfloat16 operands, float32 sums: each column's running sum passes through
    257, which bfloat16 cannot hold (8 significant bits), and ends at 1. A
    bfloat16 accumulator, or k-step partial sums rounded to bfloat16, give 0."""
    m, k, n = 8, 384, 128  # k spans several k steps with any default block_k
    b = np.zeros((k, n))
    b[0], b[1], b[-1] = 256, 1, -256
    args = on_cpu(
        jnp.ones((m, k), jnp.bfloat16), jnp.asarray(b, jnp.bfloat16), jnp.zeros(n, jnp.bfloat16)
    )
    got = {{ cookiecutter.op_name }}(*args, interpret=True)
    assert_close(got, {{ cookiecutter.op_name }}_f64(*args), on_its_platform(VALUES, got)){%- if cookiecutter.backend == "tpu" %}


@pytest.mark.parametrize("k", [100, 128, 300], ids=lambda k: f"k={k}")
def test_a_symbolic_k_sums_every_k_step(k):
    """Exported with k symbolic, the kernel cannot tell when it is lowered
    whether k fits one block (no accumulator) or spans several (assign, add,
    then the epilogue). One artifact, called with k inside one block, exactly
    one block and three blocks, gives the oracle's values each time."""
    (symbolic_k,) = jax.export.symbolic_shape("k")
    m, n = 64, 128

    def matmul(a, b, bias):
        blocks = {"block_m": 128, "block_n": 128, "block_k": 128}
        return kernel.matmul(a, b, bias, **blocks, activation="gelu", interpret=True)

    shapes = [(m, symbolic_k), (symbolic_k, n), (n,)]
    specs = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]
    exported = jax.export.export(jax.jit(matmul), platforms=["cpu"])(*specs)
    rng = np.random.default_rng(k)
    values = (rng.standard_normal(shape) for shape in ((m, k), (k, n), (n,)))
    args = on_cpu(*(jnp.asarray(x, jnp.float32) for x in values))
    got = exported.call(*args)
    assert_close(got, {{ cookiecutter.op_name }}_f64(*args), on_its_platform(VALUES, got))
{%- endif %}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", GRADIENT_SHAPES, ids=str)
def test_gradients_match_numpy(rng, shape, dtype):
    """Whichever backward this project uses, against the float64 VJP derived by
    hand (tests/oracle.py). Not against the reference's autodiff: with
    backward=reference that is the very code under test."""
    args = operands(rng, shape, dtype)
    (g,) = on_cpu(jnp.asarray(rng.standard_normal((shape[0], shape[2])), dtype))
    grads = jax.jit(vjp({{ cookiecutter.op_name }}, interpret=True))(*args, g)
    tolerance = GRADIENTS if dtype == jnp.float32 else BFLOAT16_GRADIENTS
    for got, want, arg in zip(grads, {{ cookiecutter.op_name }}_vjp_f64(*args, g), args, strict=True):
        assert got.dtype == arg.dtype
        assert_close(got, want, on_its_platform(tolerance, got))
{%- if cookiecutter.backward == "kernel" %}


def test_gradients_where_gelu_saturates():
    """Pre-activations 4 <= |z| <= 8 (a is the identity, so z = b), where
    tanh(u) rounds to +-1: a GELU derivative computed from 1 - tanh(u)^2 (JAX's
    autodiff of gelu) is there only tanh's float32 rounding error, multiplied
    by z(1 + 3 * 0.044715 z^2). It was 1.7 to 8 times this tolerance on a CPU;
    the backward's _gelu_slope, from exp, is a few percent of it. n = 4, under
    any block: the shards' shape in the sharded conformance cells that found
    it."""
    m, k, n = 16, 16, 4
    z = np.linspace(4, 8, k * n)
    z[1::2] *= -1
    a, b, bias, g = on_cpu(
        jnp.eye(m, k, dtype=jnp.float32),
        jnp.asarray(z.reshape(k, n), jnp.float32),
        jnp.zeros(n, jnp.float32),
        jnp.ones((m, n), jnp.float32),
    )
    grads = jax.jit(vjp({{ cookiecutter.op_name }}, interpret=True))(a, b, bias, g)
    for got, want in zip(grads, {{ cookiecutter.op_name }}_vjp_f64(a, b, bias, g), strict=True):
        assert_close(got, want, on_its_platform(GRADIENTS, got))
{%- endif %}


@INTERPRETER_ON_A_TPU_HOST
def test_strict_interpreter_finds_no_race_or_unwritten_memory(rng, strict):
    # Several output tiles, ragged on every axis. (At the smaller (136, 140,
    # 130) the reduction-axis-marked-parallel mutant ran into the runner's
    # timeout instead of failing fast, so this shape stays.)
    shape = (200, 300, 130)
    args = operands(rng, shape, jnp.float32)
    (g,) = on_cpu(jnp.asarray(rng.standard_normal((shape[0], shape[2])), jnp.float32))
    y = target.run_strict({{ cookiecutter.op_name }}, *args, interpret=strict)
    assert_close(y, {{ cookiecutter.op_name }}_f64(*args), on_its_platform(VALUES, y))
    grads = target.run_strict(vjp({{ cookiecutter.op_name }}, interpret=strict), *args, g)
    for got, want in zip(grads, {{ cookiecutter.op_name }}_vjp_f64(*args, g), strict=True):
        assert_close(got, want, on_its_platform(GRADIENTS, got))
{%- if cookiecutter.backend == "tpu" %}


@INTERPRETER_ON_A_TPU_HOST
def test_race_detector_fires_on_a_reduction_axis_marked_parallel(rng, strict, monkeypatch):
    """The strict test is not vacuous: mark the k axis "parallel" and the two
    simulated cores each take one k step of the same output tile, and both
    write that tile back. (With the default single core nothing runs
    concurrently, and no race can be seen.)"""
    args = operands(rng, (8, 256, 128), jnp.float32)  # one output tile, two k steps
    monkeypatch.setattr(kernel, "DIMENSION_SEMANTICS", ("parallel", "parallel", "parallel"))
    with pytest.raises(target.RACE_ERROR, match="RACE DETECTED"):
        target.run_strict({{ cookiecutter.op_name }}, *args, interpret=strict)


def kernel_modules(dtype):
    """The Mosaic modules of the forward and backward kernels, lowered for a
    TPU from this host (tests/target.py)."""
    specs = [jax.ShapeDtypeStruct(s, dtype) for s in ((256, 256), (256, 256), (256,))]
    value_and_grad = jax.value_and_grad(
        lambda *a: jnp.sum({{ cookiecutter.op_name }}(*a, interpret=False).astype(jnp.float32)),
        argnums=(0, 1, 2),
    )
    modules = target.mosaic_modules(value_and_grad, *specs)
    assert len(modules) == (3 if BACKWARD == "kernel" else 1)
    return modules


def test_index_maps_return_int32_under_x64():
    """Mosaic TPU refuses an index map that returns an int64 ("failed to
    legalize operation 'func.return': (i64, i32)", on a TPU v5e): a Python
    int literal in an index map lowers as int64 under jax_enable_x64, which
    tests/conftest.py turns on, as many users' programs do. The kernel must
    compile either way: every function of its Mosaic modules returns int32s."""
    assert jax.config.jax_enable_x64
    for module in kernel_modules(jnp.float32):
        # Each line "...func.return"(%0, %arg1) : (i64, i32) -> ()": the types.
        returned = [line.split(" : ")[-1] for line in module.splitlines() if 'func.return"' in line]
        assert any("i32" in types for types in returned), module  # the index maps
        assert not [types for types in returned if "i64" in types], module


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
def test_kernel_matmuls_ask_for_what_op_spec_declares(dtype):
    """Mosaic multiplies float32 in one bfloat16 pass unless a dot asks for
    more (jax/_src/pallas/mosaic/lowering.py: HIGHEST is
    #tpu.contract_precision<fp32>): each kernel's matmul, forward and
    backward, asks for what tests/op_spec.py's matmul_inputs declares for the
    TPU, which sets the tolerance there; bfloat16 inputs need one pass."""
    declared = SPEC.matmul_inputs.get("tpu", "float32") if dtype == jnp.float32 else "bfloat16"
    precision = target.MOSAIC_PRECISION[declared]
    for module in kernel_modules(dtype):
        matmuls = [line for line in module.splitlines() if "tpu.matmul" in line]
        assert len(matmuls) == 1, module
        if precision is None:
            assert "contract_precision" not in matmuls[0]
        else:
            assert f"precision = {precision}" in matmuls[0]


def scoped_vmem_limits(fn, *specs):
    """The vmem_limit_bytes of each kernel in fn(*specs) lowered for a TPU from
    this host (None: Mosaic's default), and the blocks of each kernel call."""
    text = target.lower(fn, *specs)
    calls = re.findall(r"tpu_custom_call\(.*", text)
    sizes = [re.search(r"scoped_memory_configs.*?size\\22: (\d+)", call) for call in calls]
    return [int(size[1]) if size else None for size in sizes]


def test_a_described_tpu_gets_blocks_and_vmem_for_its_size(monkeypatch):
    """Lowered from this host for a TPU v5e (tests/target.py's DEVICE, 128 MiB of
    VMEM), a large bfloat16 call gets the largest of kernel.BLOCKS_BY_SIZE
    (1024x1024x512: 128^3 blocks ran at 7-11% of XLA's speed there), and every
    kernel, forward and backward, asks Mosaic for the VMEM its tiles need: at
    Mosaic's default limit (16 MiB on a v5e) these blocks do not compile
    (CompileTimeScopedVmemOom). Off a TPU, without a described chip,
    DEFAULT_BLOCKS and Mosaic's default limit."""
    monkeypatch.delenv(block_table.BLOCK_TABLE_ENV, raising=False)
    monkeypatch.setattr(block_table, "read", lambda path: {})  # no tuned entry
    specs = [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in ((8192, 8192), (8192, 8192), (8192,))]
    value_and_grad = jax.value_and_grad(
        lambda *a: jnp.sum({{ cookiecutter.op_name }}(*a, interpret=False).astype(jnp.float32)),
        argnums=(0, 1, 2),
    )
    with target.export_context():
        assert kernel.vmem_capacity() == 128 * 2**20
        assert kernel.default_blocks(8192, 8192, 8192, 2) == dict(
            zip(block_table.KEYS, kernel.BLOCKS_BY_SIZE[0], strict=True)
        )
        limits = scoped_vmem_limits(value_and_grad, *specs)
    assert len(limits) == (3 if BACKWARD == "kernel" else 1)
    for limit in limits:
        assert limit is not None and kernel.DEFAULT_SCOPED_VMEM < limit <= 96 * 2**20
    if not target.present():  # a TPU host's own chip is known
        assert set(scoped_vmem_limits(value_and_grad, *specs)) == {None}
        assert kernel.default_blocks(8192, 8192, 8192, 2) == kernel.DEFAULT_BLOCKS


def test_default_blocks_shrink_to_fit_a_smaller_vmem(monkeypatch):
    """On a chip with less VMEM (16 MiB: TPU v4) the default blocks are the
    largest whose tiles take at most a quarter of it; small operands clamp the
    tiles, so they may take larger blocks."""
    monkeypatch.setattr(kernel, "vmem_capacity", lambda: 16 * 2**20)
    blocks = kernel.default_blocks(8192, 8192, 8192, 2)
    tiles = (blocks["block_m"], blocks["block_n"], blocks["block_k"])
    assert kernel.vmem_bytes(*tiles, 2, (2, 4)) <= 4 * 2**20
    assert tiles == next(
        b for b in kernel.BLOCKS_BY_SIZE if kernel.vmem_bytes(*b, 2, (2, 4)) <= 4 * 2**20
    )
    assert kernel.default_blocks(8, 128, 128, 2)["block_m"] == kernel.BLOCKS_BY_SIZE[0][0]
    assert kernel.default_blocks("m", 128, 128, 2) == kernel.DEFAULT_BLOCKS  # symbolic
{%- elif cookiecutter.backend == "mosaic_gpu" %}


def test_race_detector_fires_on_a_missing_commit_smem(rng, strict, monkeypatch):
    """The strict test is not vacuous: without plgpu.commit_smem the TMA store
    reads the output tile from SMEM before the warpgroup's writes are visible."""
    args = operands(rng, (64, 128, 64), jnp.float32)
    monkeypatch.setattr(kernel.plgpu, "commit_smem", lambda: None)
    with pytest.raises(target.RACE_ERROR, match="RACE DETECTED"):
        target.run_strict({{ cookiecutter.op_name }}, *args, interpret=strict)
{%- endif %}

{%- if cookiecutter.backend == "triton" %}


def kernel_matmul_precisions(fn, *args):
    """The precision of every dot_general inside the Pallas kernels fn runs
    (the matmul checks in tests/conformance/ skip kernels: their matmuls are the
    hardware's, which op_spec.py declares)."""
    found = []

    def walk(jaxpr, in_kernel):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general" and in_kernel:
                found.append(eqn.params["precision"])
            for param in eqn.params.values():
                for sub in param if isinstance(param, (tuple, list)) else (param,):
                    inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's Jaxpr
                    if hasattr(inner, "eqns"):
                        walk(inner, in_kernel or eqn.primitive.name == "pallas_call")

    walk(jax.make_jaxpr(fn)(*args).jaxpr, False)
    return found


def test_kernel_matmuls_ask_for_what_op_spec_declares(rng):
    """Triton multiplies float32 as TensorFloat-32 unless a dot asks for
    HIGHEST (jax/_src/pallas/triton/lowering.py): the native kernel's dots,
    forward and backward, ask for what tests/op_spec.py's matmul_inputs
    declares for the GPU, which sets the tolerance there."""
    args = operands(rng, (64, 64, 64), jnp.float32)
    g = jnp.ones((64, 64), jnp.float32)
    precisions = kernel_matmul_precisions(vjp({{ cookiecutter.op_name }}, interpret=False), *args, g)
    assert precisions, "no matmul found inside the kernels"
    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    declared = SPEC.matmul_inputs.get("gpu", "float32")
    assert all((p == highest) == (declared == "float32") for p in precisions), precisions
{%- endif %}


def test_check_grads_reverse_mode(rng):
    # Finite differences of the kernel's own forward: a coarse cross-check
    # (it passes a gradient 1% off); test_gradients_match_numpy is the real one.
    # Small and jitted: the finite differences call the kernel many times.
    args = operands(rng, (8, 64, 32), jnp.float32)
    f = jax.jit(lambda a, b, bias: {{ cookiecutter.op_name }}(a, b, bias, interpret=True))
    check_grads(f, args, order=1, modes=["rev"], atol=2e-2, rtol=2e-2, eps=1e-2)


# --- lowering for the real target, on this host ---------------------------------


def test_forward_and_backward_lower_for_the_target(rng):
    args = operands(rng, (256, 256, 256), jnp.float32)
    forward = target.lower(lambda *a: {{ cookiecutter.op_name }}(*a, interpret=False), *args)
    assert target.KERNEL_CALL in forward
    value_and_grad = jax.value_and_grad(
        lambda *a: jnp.sum({{ cookiecutter.op_name }}(*a, interpret=False)), argnums=(0, 1, 2)
    )
    # The forward kernel, plus the two backward matmul kernels when asked for.
    calls = target.lower(value_and_grad, *args).count(target.KERNEL_CALL)
    assert calls == (3 if BACKWARD == "kernel" else 1)


def test_bad_block_is_refused_before_lowering(rng):
    args = operands(rng, (256, 300, 256), jnp.float32)
    with pytest.raises(ValueError, match="invalid on"):
        {{ cookiecutter.op_name }}(*args, **target.BAD_BLOCKS)
{%- if cookiecutter.backward == "kernel" and cookiecutter.backend != "triton" %}


def test_block_only_the_backward_rejects_is_refused_up_front(rng):
    # The backward's matmuls meet the blocks on other axes than the forward's. A
    # forward-only call must still refuse blocks they reject, not run and leave
    # the error for the first gradient. (Triton blocks are not clamped to the
    # arrays, so there every call gets the same, already checked, blocks.)
    shape, blocks = target.BACKWARD_ONLY_BAD
    args = operands(rng, shape, jnp.float32)
    with pytest.raises(ValueError, match="invalid on"):
        {{ cookiecutter.op_name }}(*args, **blocks)
{%- endif %}


def test_lowering_catches_what_interpret_mode_accepts(rng, monkeypatch):
    # Without the up-front check, interpret mode runs the bad block happily...
    args = operands(rng, (256, 300, 256), jnp.float32)
    monkeypatch.setattr(kernel, "check_block", lambda *_: None)
    got = {{ cookiecutter.op_name }}(*args, **target.BAD_BLOCKS, interpret=True)
    assert_close(got, {{ cookiecutter.op_name }}_reference(*args), on_its_platform(VALUES, got))
    # ...and only lowering for the real target refuses it.
    with pytest.raises(Exception, match=target.BAD_LOWERING):
        target.lower(lambda *a: {{ cookiecutter.op_name }}(*a, **target.BAD_BLOCKS, interpret=False), *args)


# --- on the real target --------------------------------------------------------------


@needs_target
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (200, 300, 130)], ids=str)
def test_native_kernel_matches_reference(rng, shape):
    args = natively(*operands(rng, shape, jnp.bfloat16))
    got = {{ cookiecutter.op_name }}(*args, interpret=False)
    assert_close(got, {{ cookiecutter.op_name }}_reference(*args), on_its_platform(BFLOAT16_VALUES, got))


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "dtype", "kwargs", "error", "message"),
    [
        (((4,), (4, 2), (2,)), jnp.float32, {}, ValueError, "expected a \\(m, k\\)"),
        (((3, 4), (5, 2), (2,)), jnp.float32, {}, ValueError, "shapes do not agree"),
        (((3, 4), (4, 2), (3,)), jnp.float32, {}, ValueError, "shapes do not agree"),
        (((3, 4), (4, 2), (2,)), jnp.int32, {}, TypeError, "float32 or bfloat16"),
        (((3, 4), (4, 2), (2,)), jnp.float16, {}, TypeError, "float32 or bfloat16"),
        (((0, 4), (4, 2), (2,)), jnp.float32, {}, ValueError, "empty operands"),
        (((3, 4), (4, 2), (2,)), jnp.float32, {"block_m": 0}, ValueError, "positive int"),
        (((3, 4), (4, 2), (2,)), jnp.float32, {"block_n": 2.5}, ValueError, "positive int"),
    ],
)
def test_bad_input_raises_clear_error(shapes, dtype, kwargs, error, message):
    args = [np.ones(shape, dtype) for shape in shapes]
    with pytest.raises(error, match=message):
        {{ cookiecutter.op_name }}(*args, **kwargs)


@pytest.mark.parametrize("odd_one", [0, 1, 2], ids=["a", "b", "bias"])
def test_mixed_dtypes_are_refused(odd_one):
    # The kernel would otherwise run on mixed operands (interpret mode accepts
    # them) and return a's dtype.
    dtypes = [jnp.float32] * 3
    dtypes[odd_one] = jnp.bfloat16
    shapes = [(3, 4), (4, 2), (2,)]
    args = [np.ones(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    with pytest.raises(TypeError, match="share one dtype"):
        {{ cookiecutter.op_name }}(*args)
