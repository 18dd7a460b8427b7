"""The kernel composed with the rest of JAX: the implementation switch,
jax.export, sharding (shard_map and custom_partitioning) and tuned block
sizes. On a CPU host the kernel is interpreted; lowering for the real target
needs no device."""

import json
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from {{ cookiecutter.package_name }} import IMPLEMENTATION_ENV, backend, block_table, kernel

# isort: split
from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_partitioned,
    {{ cookiecutter.op_name }}_reference,
)

import target
from compare import assert_close
from oracle import GRADIENTS, VALUES, {{ cookiecutter.op_name }}_f64, {{ cookiecutter.op_name }}_vjp_f64


def operands(rng, shape, dtype=jnp.float32):
    m, k, n = shape
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    return a, b, bias


def record_kernel_calls(monkeypatch):
    """The keyword arguments of each kernel.matmul call from now on, recorded
    in the list this returns."""
    calls = []
    real = kernel.matmul
    monkeypatch.setattr(kernel, "matmul", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    return calls


@pytest.fixture
def kernel_calls(monkeypatch):
    return record_kernel_calls(monkeypatch)


def runs_kernel(calls, fn, *args):
    """Whether tracing fn calls the kernel. (A fresh function each time: JAX
    caches traces by function, and the choice is made when the op is traced.)"""
    calls.clear()
    jax.eval_shape(lambda *x: fn(*x), *args)
    return bool(calls)


# --- implementation="auto" | "kernel" | "reference" -------------------------------------


@pytest.fixture
def kernels_platform_host(monkeypatch):
    """This host made, as far as the op can tell, one whose default device is
    of the kernel's platform: jax.export's default platform says so, and
    lax.platform_dependent called eagerly takes the branch of that platform,
    as JAX 0.10 to 0.12 do there (eagerly they ask the default device, not
    the arrays': on a TPU host, arrays on a CPU device got the native kernel,
    "Only interpret mode is supported on CPU backend"). Traced, it is JAX's
    own, which chooses per lowering platform."""
    monkeypatch.setattr(backend, "default_export_platform", lambda: backend.PLATFORM)
    platform_dependent = jax.lax.platform_dependent

    def as_on_that_host(*args, default=None, **branches):
        if any(isinstance(x, jax.core.Tracer) for x in args):
            return platform_dependent(*args, default=default, **branches)
        return branches.get(backend.PLATFORM, default)(*args)

    monkeypatch.setattr(jax.lax, "platform_dependent", as_on_that_host)


def export_default(platforms, shape=(8, 128, 128)):
    """{{ cookiecutter.op_name }} with its default arguments (implementation="auto"), exported
    from this host for platforms."""
    m, k, n = shape
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((m, k), (k, n), (n,))]
    with target.export_context():
        return export.export(
            jax.jit({{ cookiecutter.op_name }}),
            platforms=platforms,
            disabled_checks=target.EXPORT_DISABLED_CHECKS,
        )(*specs)


def test_auto_exports_the_native_kernel_for_its_platform():
    # Whatever this host is: auto is chosen per lowering platform.
    assert target.KERNEL_CALL in export_default((target.EXPORT_PLATFORM,)).mlir_module()


def test_auto_is_the_reference_off_the_kernels_platform(rng, kernels_platform_host):
    # Lowered for the CPU, auto is the reference: plain XLA ops, neither the
    # kernel's custom call nor the interpreter (a while loop over the grid,
    # and for Mosaic GPU host callbacks, both custom calls or loops).
    module = export_default(("cpu",)).mlir_module()
    assert "custom_call" not in module and "stablehlo.while" not in module
    assert module.count("stablehlo.dot_general") == 1
    # On CPU devices, whatever this host's default device is (kernels_platform_host).
    args = jax.device_put(operands(rng, (8, 128, 128)), jax.devices("cpu")[0])
    want = {{ cookiecutter.op_name }}_reference(*args)
    np.testing.assert_array_equal({{ cookiecutter.op_name }}(*args), want)
    np.testing.assert_array_equal({{ cookiecutter.op_name }}_partitioned(*args), want)


def test_one_artifact_for_the_cpu_and_the_kernels_platform(rng):
    """One artifact holds the kernel for its platform and the reference for
    the CPU, which runs it. Pinned where the JAX fails it (tests/target.py
    says why): when that JAX passes, this fails; then drop the pin."""
    platforms = ("cpu", target.EXPORT_PLATFORM)
    if target.MULTI_PLATFORM_ERROR is not None:
        error, message = target.MULTI_PLATFORM_ERROR
        with pytest.raises(error, match=message):
            export_default(platforms)
        return
    exported = export.deserialize(export_default(platforms).serialize())
    assert exported.platforms == platforms
    module = exported.mlir_module()
    # The kernel's custom call, the reference's one dot, and no interpreter loop.
    assert target.KERNEL_CALL in module
    assert module.count("stablehlo.dot_general") == 1 and "stablehlo.while" not in module
    args = operands(rng, (8, 128, 128))
    got = exported.call(*jax.device_put(args, jax.devices("cpu")[0]))
    assert_close(got, {{ cookiecutter.op_name }}_f64(*args), VALUES)


def test_kernel_and_reference_on_request(rng, kernel_calls):
    # "kernel" on a CPU host is the kernel in interpret mode (test_kernel.py
    # checks its values); "reference" is the plain-JAX reference.
    args = operands(rng, (8, 128, 128))
    assert runs_kernel(kernel_calls, partial({{ cookiecutter.op_name }}, implementation="kernel"), *args)
    assert not runs_kernel(kernel_calls, partial({{ cookiecutter.op_name }}, implementation="reference"), *args)
    # The reference itself (test_reference.py checks its values).
    got = {{ cookiecutter.op_name }}(*args, implementation="reference")
    np.testing.assert_array_equal(got, {{ cookiecutter.op_name }}_reference(*args))


def test_the_kernel_on_cpu_devices_is_interpreted_whatever_the_host(rng, kernels_platform_host):
    """The kernel runs natively or interpreted by the devices it runs on, not
    by this host's default platform: on a host with one GPU the sharding tests
    use simulated CPU devices, where a kernel compiled for the GPU cannot run.
    Here the host claims the kernel's platform (kernels_platform_host); the
    CPU devices still get the interpreter (or, where it cannot run, the op's
    own refusal)."""
    args = operands(rng, (64, 128, 128))
    want = {{ cookiecutter.op_name }}_f64(*args)
    run = partial({{ cookiecutter.op_name }}, implementation="kernel")
    # Eagerly, on one CPU device's arrays.
    assert_close(run(*jax.device_put(args, jax.devices("cpu")[0])), want, VALUES)
    # Under jit, on arrays placed on a mesh of CPU devices.
    single = mesh(AxisType.Auto, (1, 1))
    placed = put(single, args, SUPPORTED)
    assert_close(jax.jit(run)(*placed), want, VALUES)
    # The partitioned op, whose partitioner callback lowers the kernel for
    # the mesh's devices.
    auto = mesh(AxisType.Auto)
    placed = put(auto, args, SUPPORTED)
    partitioned = jax.jit(partial({{ cookiecutter.op_name }}_partitioned, implementation="kernel"))
    if target.PARTITIONS_INTERPRETED is not True:
        error, message = target.PARTITIONS_INTERPRETED
        with pytest.raises(error, match=message):
            partitioned(*placed)
    else:
        assert_close(partitioned(*placed), want, VALUES)
{%- if cookiecutter.backend == "mosaic_gpu" %}


def test_the_platform_is_the_operands_on_a_gpu_host(rng, monkeypatch):
    """backend.device_platform on a host whose default platform is the GPU,
    for arrays committed to a CPU device: what their devices, their mesh or
    jax.default_device say, not the host. Under jax.jit of arrays on one
    device, which jit traces once wherever they are, the default device's
    (device_platform's docstring says what to do there)."""
    monkeypatch.setattr(backend, "default_export_platform", lambda: "cuda")
    cpu = jax.devices("cpu")[0]
    args = jax.device_put(operands(rng, (8, 128, 128)), cpu)

    def under_jit(*arrays):
        seen = []
        jax.jit(lambda *x: seen.append(backend.device_platform(*x)))(*arrays)
        return seen[0]

    assert backend.device_platform(*args) == "cpu"  # eagerly: their devices
    assert under_jit(*put(mesh(AxisType.Auto, (1, 1)), args, SUPPORTED)) == "cpu"  # their mesh
    with jax.default_device(cpu):
        assert under_jit(*args) == "cpu"
    assert under_jit(*args) == "gpu"
{%- endif %}


@pytest.mark.parametrize(("forced", "passed"), [("reference", "kernel"), ("kernel", "reference")])
def test_environment_variable_overrides_the_argument(
    rng, kernel_calls, monkeypatch, forced, passed
):
    args = operands(rng, (8, 128, 128))
    monkeypatch.setenv(IMPLEMENTATION_ENV, forced)
    traced = runs_kernel(kernel_calls, partial({{ cookiecutter.op_name }}, implementation=passed), *args)
    assert traced == (forced == "kernel")


def test_unknown_implementation_is_refused(rng, monkeypatch):
    args = operands(rng, (8, 128, 128))
    with pytest.raises(ValueError, match="implementation must be one of"):
        {{ cookiecutter.op_name }}(*args, implementation="pallas")
    monkeypatch.setenv(IMPLEMENTATION_ENV, "fast")
    with pytest.raises(ValueError, match=IMPLEMENTATION_ENV):
        {{ cookiecutter.op_name }}(*args)


# --- jax.export, for the kernel's platform, from this host ---------------------------------


def export_kernel(*shapes):
    def f(a, b, bias):
        return {{ cookiecutter.op_name }}(a, b, bias, implementation="kernel", interpret=False)

    specs = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]
    with target.export_context():
        return export.export(
            jax.jit(f),
            platforms=(target.EXPORT_PLATFORM,),
            disabled_checks=target.EXPORT_DISABLED_CHECKS,
        )(*specs)


def test_exports_serializes_and_deserializes_for_the_target():
    exported = export_kernel((256, 128), (128, 256), (256,))
    restored = export.deserialize(exported.serialize())
    assert restored.platforms == (target.EXPORT_PLATFORM,)
    assert target.KERNEL_CALL in restored.mlir_module()
    # Built for the target only: this host cannot run it, and says so.
    if export.default_export_platform() != target.EXPORT_PLATFORM:
        args = [np.ones(s.shape, np.float32) for s in restored.in_avals]
        with pytest.raises(ValueError, match="exported for platforms"):
            restored.call(*args)


def test_symbolic_batch_dimension():
    (batch,) = export.symbolic_shape(target.SYMBOLIC_BATCH)
    shapes = ((batch, 128), (128, 256), (256,))
    if target.SYMBOLIC_BATCH_ERROR is not None:
        # Pinned: when JAX fixes it this test fails; then drop the pin.
        error, message = target.SYMBOLIC_BATCH_ERROR
        with pytest.raises(error, match=message):
            export_kernel(*shapes)
        return
    exported = export_kernel(*shapes)
    assert str(exported.in_avals[0].shape[0]) == str(batch)
    assert target.KERNEL_CALL in export.deserialize(exported.serialize()).mlir_module()


# --- sharding, on 8 simulated devices ------------------------------------------------------


def mesh(axis_type, shape=(2, 2)):
    """Two row shards by two column shards (or shape), on the simulated CPU
    devices (conftest.py), also on a host with an accelerator."""
    devices = jax.devices("cpu")[: math.prod(shape)]
    return jax.make_mesh(shape, ("rows", "cols"), axis_types=(axis_type,) * 2, devices=devices)


def compiled(fn, *args):
    return jax.jit(fn).lower(*args).compile().as_text()


def put(mesh, arrays, specs):
    return [jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip(arrays, specs, strict=True)]


# a's rows over "rows", b's and bias's columns over "cols": what the kernel
# supports with no communication in the forward.
SUPPORTED = (P("rows", None), P(None, "cols"), P("cols"))
# The kernel, interpreted: these tests run on CPU devices.
interpreted = partial({{ cookiecutter.op_name }}, implementation="kernel", interpret=True)
interpreted_partitioned = partial({{ cookiecutter.op_name }}_partitioned, implementation="kernel", interpret=True)


def values_and_cotangents(f):
    """(a, b, bias, g) -> f(a, b, bias) and its cotangents for g."""

    def run(a, b, bias, g):
        y, f_vjp = jax.vjp(f, a, b, bias)
        return y, f_vjp(g)

    return jax.jit(run)


def check_sharded_run(f, args, sharded):
    """Run f and its VJP on the shards and compare with the float64 oracle."""
    g = np.ones((args[0].shape[0], args[1].shape[1]), np.float32)
    y, grads = values_and_cotangents(f)(*sharded, g)
    assert y.sharding.spec == P("rows", "cols")
    assert_close(y, {{ cookiecutter.op_name }}_f64(*args), VALUES)
    for got, want in zip(grads, {{ cookiecutter.op_name }}_vjp_f64(*args, g), strict=True):
        assert_close(got, want, GRADIENTS)


def test_explicit_mesh_runs_the_kernel_per_shard(rng):
    explicit = mesh(AxisType.Explicit)
    args = operands(rng, (64, 128, 128))
    if not target.INTERPRETS_SHARDED:
        with jax.set_mesh(explicit):
            sharded = put(explicit, args, SUPPORTED)
            with pytest.raises(NotImplementedError, match="several devices"):
                compiled(interpreted, *sharded)
        # What the interpreter can run: the same per-shard path on a 1x1 mesh
        # (values, gradients and the output's sharding; no cross-device sums).
        explicit = mesh(AxisType.Explicit, (1, 1))
    with jax.set_mesh(explicit):
        sharded = put(explicit, args, SUPPORTED)
        hlo = compiled(interpreted, *sharded)
        assert "all-gather" not in hlo and "all-reduce" not in hlo
        # The gradients sum over shards (db over rows, da over columns): the
        # transpose of shard_map adds those all-reduces.
        check_sharded_run(interpreted, args, sharded)


def test_explicit_mesh_refuses_a_sharded_contraction(rng):
    explicit = mesh(AxisType.Explicit)
    args = operands(rng, (64, 128, 128))
    with jax.set_mesh(explicit):
        sharded = put(explicit, args, (P(None, "rows"), P("rows", None), P(None)))
        with pytest.raises(ValueError, match="contracted axis k is sharded"):
            jax.eval_shape(interpreted, *sharded)


def opaque(f):
    """f as the partitioner sees the native kernel, a custom call it cannot look
    into. (Interpreted, the kernel is plain HLO, which XLA may split itself: the
    plain op would show nothing here.) custom_partitioning with no
    sharding_rule is such a call: the partitioner gives it whole operands."""
    op = custom_partitioning(lambda a, b, bias: f(a, b, bias))

    def whole(mesh, arg_shapes, result_shape):
        replicated = NamedSharding(mesh, P())
        return mesh, f, replicated, (replicated,) * len(arg_shapes)

    op.def_partition(partition=whole)
    return op


def test_custom_partitioning_keeps_operands_local(rng):
    auto = mesh(AxisType.Auto)
    args = operands(rng, (64, 128, 128))
    with jax.set_mesh(auto):
        sharded = put(auto, args, SUPPORTED)
        if target.PARTITIONS_INTERPRETED is not True:
            # Pinned (tests/target.py says why): fails when JAX fixes it.
            error, message = target.PARTITIONS_INTERPRETED
            with pytest.raises(error, match=message):
                compiled(interpreted_partitioned, *sharded)
            return
        hlo = compiled(interpreted_partitioned, *sharded)
        assert "all-gather" not in hlo and "all-reduce" not in hlo
        # The contrast: the plain op, as the partitioner sees the native kernel
        # (one call it cannot look into), has its operands gathered.
        assert "all-gather" in compiled(opaque(interpreted), *sharded)
        # Differentiable through its custom VJP (custom_partitioning has no
        # autodiff rule); the backward is XLA's, partitioned by XLA.
        check_sharded_run(interpreted_partitioned, args, sharded)


# --- tuned block sizes --------------------------------------------------------------------

# Small, yet large enough that each target's BAD_BLOCKS stay invalid after
# clamping to the arrays (TPU's block_k=100 < k; Mosaic GPU's block_m=96 < m).
SHAPE = (128, 256, 64)


def test_blocks_are_tuned_for_the_device_the_kernel_runs_on(tmp_path, monkeypatch, kernel_calls):
    """Exported from this host for the kernel's platform, the native kernel
    gets the entry of the device described to JAX (tests/target.py's DEVICE),
    or this host's where it is of that platform; the interpreted kernel this
    host's entry; a trace that describes no device, the defaults."""
    default = tuple(kernel.DEFAULT_BLOCKS.values())
    for_target, for_host = [c for c in kernel.TUNING_CANDIDATES if c != default][:2]
    bucket = block_table.bucket(*SHAPE)
    table = {
        target.DEVICE.device_kind: {"float32": {bucket: list(for_target)}},
        # Last: on a host of the target's kind, this entry is the one.
        block_table.device_kind(): {"float32": {bucket: list(for_host)}},
    }
    (tmp_path / "blocks.json").write_text(json.dumps(table))
    monkeypatch.setenv(block_table.BLOCK_TABLE_ENV, str(tmp_path / "blocks.json"))
    args = operands(np.random.default_rng(0), SHAPE)
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args]

    def blocks(interpret):
        """The blocks of the kernel calls so far, native (False) or interpreted."""
        used = [kw for kw in kernel_calls if kw.get("interpret") is interpret]
        return {(kw["block_m"], kw["block_n"], kw["block_k"]) for kw in used}

    export_default((target.EXPORT_PLATFORM,), SHAPE)
    assert blocks(False) == {for_host if target.present() else for_target}
    kernel_calls.clear()
    jax.eval_shape(partial({{ cookiecutter.op_name }}, implementation="kernel", interpret=True), *specs)
    assert blocks(True) == {for_host}
    if not target.present():
        kernel_calls.clear()
        jax.eval_shape({{ cookiecutter.op_name }}, *specs)  # traced with no device described
        assert blocks(False) == {default}


def entry(blocks):
    """A table with one entry, for this device, float32 and SHAPE's bucket."""
    bucket = block_table.bucket(*SHAPE)
    return json.dumps({block_table.device_kind(): {"float32": {bucket: blocks}}})


REFUSED = [{**kernel.DEFAULT_BLOCKS, **target.BAD_BLOCKS}[key] for key in block_table.KEYS]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "malformed"),
        (entry([128, 0, 128]), "malformed"),
        (entry(REFUSED), "the tuned blocks for this shape in"),
        ("{not json", "cannot read"),
    ],
    ids=["not-an-object", "zero-block", "blocks-the-kernel-refuses", "not-json"],
)
def test_an_invalid_table_is_a_clear_error(tmp_path, monkeypatch, content, message):
    """An invalid table raises, naming the file (block_table.py says why: a
    table is configuration someone wrote, and a typo should not go unnoticed)."""
    table = tmp_path / "blocks.json"
    table.write_text(content)
    monkeypatch.setenv(block_table.BLOCK_TABLE_ENV, str(table))
    with pytest.raises(ValueError, match=message) as error:
        jax.eval_shape(
            partial({{ cookiecutter.op_name }}, implementation="kernel"),
            *operands(np.random.default_rng(0), SHAPE),
        )
    assert str(table) in str(error.value)
