{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""The serialized artifact against the plain-JAX model: round trips at many
sizes, platforms, differentiation, bad inputs, damaged files and retired formats."""

import hashlib
import json
import re
import types

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import pytest
from jax import export
from jax._src.export import serialization_generated as flatbuffer

from {{ cookiecutter.package_name }} import artifact

from compare import Ulps, assert_close
from op_spec import SPEC

# The same program on the same device: bit for bit.
EXACT = Ulps(at_value=0)
VALUES = SPEC.tolerance
# The first input, a float one (the one differentiated), and its name.
X = artifact.INPUTS[0][0]
WRONG_DTYPE = f"{X} must be {artifact.INPUTS[0][2]}, got float64"


def allowed(sizes):
    """Whether sizes of the dimension variables meet the declared constraints."""
    named = dict(zip({% if seq %}("b", "s"){% else %}("b",){% endif %}, sizes, strict=True))
    return all(artifact._holds(constraint, named) for constraint in artifact.CONSTRAINTS)


# Concrete sizes for every symbolic dimension, edges included.
SIZES = [{% if seq %}(1, 1), (2, 3), (5, 17), (64, 1){% else %}(1,), (2,), (17,), (1000,){% endif %}]
SIZES = [sizes for sizes in SIZES if allowed(sizes)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One exported artifact on disk, shared by the tests of this module."""
    path = tmp_path_factory.mktemp("artifact") / "model.jax"
    return artifact.save(artifact.export_model(), path)


@pytest.fixture(scope="module")
def loaded(saved):
    return artifact.load(saved)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    """An artifact for a platform this process does not run on (it lowers
    without the device)."""
    platform = "tpu" if artifact.default_platform() == "cuda" else "cuda"
    path = tmp_path_factory.mktemp("foreign") / f"{platform}.jax"
    return artifact.load(artifact.save(artifact.export_model(platforms=(platform,)), path))


def on_the_cpu(x):
    """x committed to the CPU, where a float64 oracle runs under jax.jit
    (its constants follow): an accelerator is asked for no float64, which a
    TPU emulates (tens to hundreds of ulps off IEEE float64)."""
    return jax.device_put(x, jax.devices("cpu")[0])


def inputs_for(loaded, sizes, seed=0):
    {% if seq %}batch, seq = sizes
    return artifact.random_inputs(loaded.metadata, batch=batch, seq=seq, seed=seed){% else %}(batch,) = sizes
    return artifact.random_inputs(loaded.metadata, batch=batch, seed=seed){% endif %}


@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_round_trip_matches_numpy(loaded, sizes):
    inputs = inputs_for(loaded, sizes)
    got = loaded(*inputs.values())
    # The independent float64 oracle.
    want = SPEC.oracle(*inputs.values())
    assert got.shape == want.shape
    assert_close(got, want, VALUES)


def test_metadata_describes_the_artifact(saved, loaded):
    meta = loaded.metadata
    assert meta["jax_version"] == jax.__version__
    assert meta["jaxlib_version"] == jaxlib.__version__
    assert meta["serialization_version"] == artifact.serialization_version(saved.read_bytes())
    assert meta["serialization_version"] == artifact.current_serialization_version()
    assert tuple(meta["platforms"]) == artifact.PLATFORMS == loaded.exported.platforms
    assert meta["calling_convention_version"] == loaded.exported.calling_convention_version
    assert meta["vjp_order"] == artifact.VJP_ORDER
    symbolic = [", ".join(map(str, aval.shape)) for aval in loaded.exported.in_avals]
    assert [i["shape"] for i in meta["inputs"]] == symbolic
    dims = {% if seq %}("b", "s"){% else %}("b",){% endif %}  # the dimension variables
    shape = ", ".join(a if a in dims else str(SPEC.sizes[a]) for a in SPEC.outputs[0])
    assert meta["outputs"][0]["shape"] == shape
    assert meta["size_bytes"] == saved.stat().st_size


def test_every_requested_platform_is_lowered(loaded):
    assert loaded.exported.platforms == artifact.PLATFORMS
    # A multi-platform module takes the index of the platform it runs on as
    # an extra argument and dispatches on it.
    multi = 'jax.global_constant = "_platform_index"' in loaded.exported.mlir_module()
    assert multi == (len(artifact.PLATFORMS) > 1)
    for platform in artifact.PLATFORMS:  # each lowers on its own, no device needed
        assert artifact.export_model(platforms=(platform,)).platforms == (platform,)


@pytest.fixture
def tpu_host_pinned_to_the_cpu(monkeypatch):
    """A simulated TPU host on which the caller pinned JAX's default device to
    the CPU, as tests/op_spec.py does for a CPU-only artifact on any
    accelerator host: uncommitted inputs run on the CPU there, not on the
    default backend."""
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    monkeypatch.setattr(export, "default_export_platform", lambda: "tpu")
    with jax.default_device(jax.devices("cpu")[0]):
        yield


# Where the call runs: where jax.jit puts NumPy inputs here, and on a
# simulated TPU host whose default device is pinned to the CPU.
HOSTS = ["this-host", "tpu-host-pinned-to-the-cpu"]


@pytest.fixture(params=HOSTS)
def host(request):
    if request.param != "this-host":
        request.getfixturevalue(request.param.replace("-", "_"))
    return request.param


def test_default_platform_is_where_uncommitted_inputs_run(host):
    pinned = jax.config.jax_default_device
    want = export.default_export_platform() if pinned is None else pinned.platform
    assert artifact.default_platform() == want
    if host != "this-host":
        assert want == "cpu"


def test_artifact_without_the_current_platform_is_refused(foreign, host):
    # The current platform: the one the call runs on (the pinned CPU on the
    # simulated TPU host), not the default backend's.
    (platform,) = foreign.exported.platforms
    here = artifact.default_platform()
    with pytest.raises(ValueError, match=f"exported for {platform}, not for {here}"):
        foreign(*inputs_for(foreign, SIZES[1]).values())
    # JAX's own check, if our wrapper is bypassed, is as clear:
    with pytest.raises(ValueError, match="exported for platforms"):
        foreign.exported.call(*inputs_for(foreign, SIZES[1]).values())


# (what jax.Device.platform says, what jax.export records) on each kind of machine
PLATFORM_NAMES = [("cpu", "cpu"), ("gpu", "cuda"), ("gpu", "rocm"), ("tpu", "tpu")]


@pytest.mark.parametrize("device, canonical", PLATFORM_NAMES)
def test_platform_check_compares_canonical_names(device, canonical):
    for exported_for in [(canonical,), ("cpu", "cuda", "rocm", "tpu")]:
        assert artifact.platform_error(exported_for, canonical) is None
        assert artifact.platform_error(exported_for, device) is None
    others = tuple(p for p in ("cpu", "cuda", "rocm", "tpu") if p != canonical)
    error = artifact.platform_error(others, canonical)
    assert error and f"not for {canonical}; re-export it with {canonical}" in error
    if device != canonical:  # a bare "gpu" matches no artifact without a GPU platform
        assert artifact.platform_error(("cpu", "tpu"), device) is not None


# (what the artifact was exported for, where NumPy inputs run on an NVIDIA GPU
# host: the GPU, the CPU, or nowhere)
ON_A_GPU_HOST = [
    (("cuda",), "gpu"),
    (("cpu", "cuda", "tpu"), "gpu"),
    (("cpu",), "cpu"),
    (("rocm",), None),
]


@pytest.fixture
def unpinned():
    """No default device pinned, as on a host that runs its own platform
    (tests/op_spec.py pins the CPU where the artifact lacks the host's)."""
    with jax.default_device(None):
        yield


@pytest.mark.parametrize("exported_for, runs_on", ON_A_GPU_HOST, ids=str)
def test_call_on_a_simulated_nvidia_gpu(monkeypatch, unpinned, exported_for, runs_on):
    # Stands in for the Exported: its platforms and signature, and a call whose
    # result says it was made.
    stand_in = types.SimpleNamespace(
        platforms=exported_for,
        in_avals=artifact.input_specs(),
        out_avals=(jax.ShapeDtypeStruct((), jnp.int32),),
        call=lambda *args: jnp.int32(7),
    )
    metadata = {"inputs": artifact.input_metadata(), "constraints": list(artifact.CONSTRAINTS)}
    loaded = artifact.Artifact(stand_in, metadata)
    inputs = inputs_for(loaded, SIZES[1])
    # What JAX reports on an NVIDIA GPU: the device's platform is "gpu", the
    # platform jax.export lowers for is "cuda"; jax.devices("cpu") is the CPU's.
    gpu = types.SimpleNamespace(platform="gpu", device_kind="NVIDIA H200", id=0)
    cpu_devices = jax.devices("cpu")
    monkeypatch.setattr(
        jax, "devices", lambda backend=None: cpu_devices if backend == "cpu" else [gpu]
    )
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(export, "default_export_platform", lambda: "cuda")
    if runs_on == "gpu":  # left where jax.jit puts NumPy inputs (here, the real CPU)
        out = loaded(*inputs.values())
        assert out == 7 and not out.committed
    elif runs_on == "cpu":  # moved to the CPU device first, not refused
        out = loaded(*inputs.values())
        assert out == 7 and out.committed and out.devices() == {cpu_devices[0]}
    else:
        wanted = f"exported for {', '.join(exported_for)}, not for cuda or cpu"
        with pytest.raises(ValueError, match=wanted):
            loaded(*inputs.values())


def fake_devices(platform, count):
    return [types.SimpleNamespace(platform=platform, id=i) for i in range(count)]


GPU_HOST = {"cuda": fake_devices("gpu", 2), "cpu": fake_devices("cpu", 8)}
TPU_HOST = {"tpu": fake_devices("tpu", 4), "cpu": fake_devices("cpu", 1)}
CPU_HOST = {"cpu": fake_devices("cpu", 8)}


@pytest.mark.parametrize(
    "exported_for, devices, chosen",
    [
        (("cpu",), GPU_HOST, GPU_HOST["cpu"][0]),
        (("cpu", "cuda", "tpu"), GPU_HOST, GPU_HOST["cuda"][0]),
        (("cuda",), GPU_HOST, GPU_HOST["cuda"][0]),
        (("cpu", "cuda", "tpu"), TPU_HOST, TPU_HOST["tpu"][0]),
        (("cpu", "cuda"), TPU_HOST, TPU_HOST["cpu"][0]),
        (("cpu",), CPU_HOST, CPU_HOST["cpu"][0]),
        (("cpu",), {"cuda": [], "cpu": CPU_HOST["cpu"]}, CPU_HOST["cpu"][0]),
    ],
    ids=["cpu-gpu-host", "all-gpu-host", "cuda-gpu-host", "all-tpu-host", "cpu-cuda-tpu-host"]
    + ["cpu-cpu-host", "cpu-no-gpu-devices"],
)
def test_the_device_is_the_first_of_a_platform_the_artifact_has(exported_for, devices, chosen):
    # A pure choice: fake devices, no JAX. The default backend's come first.
    assert artifact.choose_device(exported_for, devices) is chosen


@pytest.mark.parametrize(
    "exported_for, devices, message",
    [
        (("rocm",), GPU_HOST, "exported for rocm, not for cuda or cpu; re-export it with cuda"),
        (("cuda",), CPU_HOST, "exported for cuda, not for cpu; re-export it with cpu"),
        (("cuda", "tpu"), {"cpu": []}, "exported for cuda, tpu, not for any platform here"),
    ],
    ids=["rocm-gpu-host", "cuda-cpu-host", "no-devices"],
)
def test_no_device_for_the_artifact_is_a_clear_error(exported_for, devices, message):
    with pytest.raises(ValueError, match=message):
        artifact.choose_device(exported_for, devices)


def test_available_devices_put_the_default_platform_first():
    devices = artifact.available_devices()
    assert next(iter(devices)) == export.default_export_platform()
    assert devices[export.default_export_platform()] == jax.devices()
    assert devices["cpu"] == jax.devices("cpu")


def test_inputs_are_checked_once_per_signature(loaded, monkeypatch):
    checked = []
    check_inputs = artifact.check_inputs
    monkeypatch.setattr(artifact, "check_inputs", lambda *a: checked.append(1) or check_inputs(*a))
    fresh = artifact.Artifact(loaded.exported, loaded.metadata)
    first, second = inputs_for(fresh, SIZES[1]), inputs_for(fresh, SIZES[2], seed=1)
    for inputs in [first, first, second, first, second]:
        want = SPEC.oracle(*inputs.values())
        assert_close(fresh(*inputs.values()), want, VALUES)
    assert len(checked) == 2  # one per signature, however many calls
    # The same shapes with another dtype are another signature, checked anew
    # (without x64 JAX itself would take float64 as float32), and a failed
    # check is not remembered: it raises on every call.
    wrong = {**first, X: first[X].astype(np.float64)}
    for x64 in [False, True]:
        with jax.enable_x64(x64), pytest.raises(TypeError, match=WRONG_DTYPE):
            fresh(*wrong.values())
    assert len(checked) == 4


def test_checked_signatures_are_bounded(loaded, monkeypatch):
    # An Artifact remembers at most CHECKED_SIGNATURES signatures and forgets
    # the least recently used one first; a forgotten one is checked again.
    checked = []
    check_inputs = artifact.check_inputs
    monkeypatch.setattr(artifact, "check_inputs", lambda *a: checked.append(1) or check_inputs(*a))
    monkeypatch.setattr(artifact, "CHECKED_SIGNATURES", 2)
    fresh = artifact.Artifact(loaded.exported, loaded.metadata)
    a, b, c = (inputs_for(fresh, sizes) for sizes in SIZES[:3])
    # (inputs, how many checks so far): a is used again before c arrives, so
    # c pushes out b, not a.
    for inputs, checks in [(a, 1), (b, 2), (a, 2), (c, 3), (a, 3), (b, 4)]:
        fresh(*inputs.values())
        assert len(checked) == checks
    assert len(fresh._checked) == 2


def test_cpu_inputs_run_on_a_simulated_gpu_host(loaded, monkeypatch, unpinned):
    # On a GPU host the default platform is cuda, but inputs committed to the
    # CPU run on the CPU, on the very device they are on: what decides is
    # where the inputs are.
    inputs = inputs_for(loaded, SIZES[1])
    cpu = jax.devices("cpu")[-1]  # not the first: committed inputs are not moved
    on_cpu = [jax.device_put(x, cpu) for x in inputs.values()]
    # What the program computes on the CPU, and where this host runs NumPy
    # inputs (its accelerator, if the artifact has that platform): the same
    # program on the same platform gives the same bits, another platform
    # other bits (a TPU's float32 tanh is not the CPU's).
    on_the_cpu = loaded(*on_cpu)
    where_numpy_runs = loaded(*inputs.values())
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(export, "default_export_platform", lambda: "cuda")
    got = artifact.Artifact(loaded.exported, loaded.metadata)(*on_cpu)
    assert_close(got, on_the_cpu, EXACT)
    assert got.devices() == {cpu}
    # Uncommitted inputs (NumPy arrays) would go to the default device, the
    # GPU: a CPU-only artifact moves them to the CPU instead of failing there;
    # one with cuda leaves them where jax.jit puts them (here, the real host's
    # default device).
    fresh = artifact.Artifact(loaded.exported, loaded.metadata)
    got = fresh(*inputs.values())
    if "cuda" in loaded.exported.platforms:
        assert_close(got, where_numpy_runs, EXACT)
    else:
        assert_close(got, on_the_cpu, EXACT)
        assert got.devices() == {jax.devices("cpu")[0]} and got.committed


def test_jit_on_a_platform_the_artifact_lacks_is_refused(foreign, host):
    # Under jit the inputs are traced: where the call runs is decided when
    # the enclosing program is lowered (for the default device: the pinned
    # CPU on the simulated TPU host), and Exported.call refuses a platform
    # the artifact lacks, naming both.
    (platform,) = foreign.exported.platforms
    here = artifact.default_platform()
    wanted = rf"exported for platforms '\('{platform}',\)' but it is used on '\('{here}',\)'"
    with pytest.raises(ValueError, match=wanted):
        jax.jit(foreign)(*inputs_for(foreign, SIZES[1]).values())


def test_called_inside_another_export(loaded):
    # A caller exporting its own function around the artifact: the inputs
    # are traced with symbolic sizes, in the caller's scope, which need not
    # repeat the artifact's constraints.
    scope = export.SymbolicScope()
    specs = [
        jax.ShapeDtypeStruct(export.symbolic_shape(spec["shape"], scope=scope), spec["dtype"])
        for spec in loaded.metadata["inputs"]
    ]
    # For the artifact's platforms: an export is called only on platforms it
    # was exported for, and the artifact runs only on its own. (Exporting for
    # the default one, export's default, fails wherever the artifact lacks
    # it: a CPU-only artifact on an accelerator host.)
    outer = export.export(jax.jit(loaded), platforms=loaded.exported.platforms)(*specs)
    inputs = inputs_for(loaded, SIZES[2])
    assert_close(outer.call(*inputs.values()), loaded(*inputs.values()), VALUES)


def test_jit_of_the_loaded_call(loaded):
    inputs = inputs_for(loaded, SIZES[2])
    got = jax.jit(loaded.exported.call)(*inputs.values())
    assert_close(got, SPEC.reference(*inputs.values()), VALUES)


def test_vmap_is_not_supported_by_exported_calls(loaded):
    # jax.export's own call has no batching rule; Artifact's call
    # (composable_call) folds vmap's axis into the symbolic batch dimension
    # (tests/test_conformance.py checks it, vmap-* cells).
    inputs = inputs_for(loaded, SIZES[1])
    stacked = [np.stack([a, a]) for a in inputs.values()]
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported'"):
        jax.vmap(loaded.exported.call)(*stacked)
{% if cookiecutter.vjp_order != "0" %}

# The smallest sizes, 1 (the conformance cells take the gradient at theirs).
@pytest.mark.parametrize("sizes", SIZES[:1], ids=str)
def test_grad_through_the_artifact_matches_reference(loaded, sizes):
    inputs = inputs_for(loaded, sizes)
    x, rest = inputs[X], list(inputs.values())[1:]
    got = jax.grad(lambda x: jnp.sum(loaded(x, *rest) ** 2))(x)
    # The reference's gradient in float64 (x64 is on in the tests): another
    # program than the float32 one that was exported, so a fault in that one
    # does not cancel out.
    reference_grad = jax.jit(jax.grad(lambda x: jnp.sum(SPEC.reference(x, *rest) ** 2)))
    want = reference_grad(on_the_cpu(x.astype(np.float64)))
    assert want.devices() == {jax.devices("cpu")[0]}
    assert_close(got, want, SPEC.gradient_tolerance)
{% endif %}

def test_differentiable_to_the_declared_order(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    x, rest = inputs[X], list(inputs.values())[1:]

    # derivatives[k]: the k-th derivative of sum(artifact), summed to a scalar.
    derivatives = [lambda x: jnp.sum(loaded(x, *rest))]
    for _ in range(artifact.VJP_ORDER + 1):
        grad = jax.grad(derivatives[-1])
        derivatives.append(lambda x, grad=grad: jnp.sum(grad(x)))
    for order in range(1, artifact.VJP_ORDER + 1):
        assert np.isfinite(derivatives[order](x))
    with pytest.raises(ValueError, match=r"serialized with.*vjp_order="):
        derivatives[-1](x)


def test_artifact_without_vjp_cannot_be_differentiated(loaded, tmp_path):
    path = artifact.save(loaded.exported, tmp_path / "novjp.jax", vjp_order=0)
    loaded = artifact.load(path)
    inputs = inputs_for(loaded, SIZES[1])
    x, rest = inputs[X], list(inputs.values())[1:]
    with pytest.raises(ValueError, match=r"serialized without its VJP \(vjp_order=0\)"):
        jax.grad(lambda x: jnp.sum(loaded(x, *rest)))(x)


@pytest.fixture(scope="module")
def by_order(tmp_path_factory):
    """The model saved with vjp_order 0, 1 and 2, whatever VJP_ORDER says."""
    folder = tmp_path_factory.mktemp("orders")
    exported = artifact.export_model()
    return {
        order: artifact.load(artifact.save(exported, folder / f"order{order}.jax", vjp_order=order))
        for order in range(3)
    }


def test_second_order_where_saved_with_order_2(by_order):
    loaded = by_order[2]
    inputs = inputs_for(loaded, SIZES[1])
    x, rest = inputs[X], list(inputs.values())[1:]
    rng = np.random.default_rng(2)
    # A random cotangent and direction: sums of outputs can hide a wrong term.
    ct = rng.standard_normal(loaded(x, *rest).shape).astype(np.float32)
    direction = rng.standard_normal(x.shape).astype(np.float32)

    def second_order(fn, x):
        first = jax.grad(lambda x: jnp.sum(fn(x, *rest) * ct))
        return jax.grad(lambda x: jnp.sum(first(x) * direction))(x)

    got = second_order(loaded, x)
    # The reference's second order in float64 (x64 is on in the tests).
    want = jax.jit(lambda x: second_order(SPEC.reference, x))(on_the_cpu(x.astype(np.float64)))
    assert want.devices() == {jax.devices("cpu")[0]}
    assert_close(got, want, SPEC.gradient_tolerance)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_differentiating_beyond_the_saved_order_is_refused(by_order, order):
    loaded = by_order[order]
    inputs = inputs_for(loaded, SIZES[1])
    x, rest = inputs[X], list(inputs.values())[1:]
    # derivatives[k]: the k-th derivative of sum(artifact), summed to a scalar.
    derivatives = [lambda x: jnp.sum(loaded(x, *rest))]
    for _ in range(order):
        grad = jax.grad(derivatives[-1])
        derivatives.append(lambda x, grad=grad: jnp.sum(grad(x)))
        assert np.isfinite(derivatives[-1](x))
    saved_with = r"without its VJP \(vjp_order=0\)" if order == 0 else f"with vjp_order={order}"
    fix = rf"re-export it with save\(\.\.\., vjp_order={order + 1}\)"
    with pytest.raises(ValueError, match=rf"serialized {saved_with}; {fix}"):
        jax.grad(derivatives[-1])(x)


# --- bad inputs and damaged files ------------------------------------------------


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "no-x64"])
def test_wrong_dtype(loaded, x64):
    inputs = inputs_for(loaded, SIZES[1])
    inputs[X] = inputs[X].astype(np.float64)
    # Without x64 JAX would quietly turn float64 into float32: the check must
    # look at the caller's array, not at what JAX makes of it.
    with jax.enable_x64(x64), pytest.raises(TypeError, match=WRONG_DTYPE):
        loaded(*inputs.values())


def test_python_lists_are_checked_too(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    with pytest.raises(TypeError, match=WRONG_DTYPE):
        loaded(*[a.tolist() for a in inputs.values()])


def test_wrong_rank(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    inputs[X] = inputs[X][0]
    with pytest.raises(ValueError, match=f"{X} must have rank"):
        loaded(*inputs.values())


def test_static_dimension_mismatch(loaded):
    static = [
        (name, axis, int(dim))
        for name, shape, _ in artifact.INPUTS
        for axis, dim in enumerate(shape.split(","))
        if dim.strip().isdigit()
    ]
    if not static:
        pytest.skip("no input has a static dimension")
    name, axis, size = static[0]
    inputs = inputs_for(loaded, SIZES[1])
    inputs[name] = np.take(inputs[name], range(size - 1), axis=axis)
    with pytest.raises(ValueError, match=rf"{name}.shape\[{axis}\] must be {size}, got {size - 1}"):
        loaded(*inputs.values())


def test_wrong_number_of_inputs(loaded):
    with pytest.raises(TypeError, match=f"takes {len(artifact.INPUTS)} inputs"):
        loaded()


def test_shared_dimension_must_agree(loaded):
    # The first dimension variable that two inputs share, from the declaration.
    seen, shared = {}, []
    for name, shape, _ in artifact.INPUTS:
        for axis, dim in enumerate(d.strip() for d in shape.split(",")):
            if not dim.isdigit() and dim in seen:
                shared.append((dim, name, axis))
            seen.setdefault(dim, name)
    if not shared:
        pytest.skip("no two inputs share a dimension variable: none can disagree")
    dim, other, axis = shared[0]
    sizes = next(s for s in SIZES if min(s) >= 2)
    inputs = inputs_for(loaded, sizes)
    size = inputs[other].shape[axis]
    inputs[other] = np.take(inputs[other], range(size - 1), axis=axis)
    with pytest.raises(
        ValueError, match=f"dimension {dim} is {size} in one input and {size - 1} in {other}"
    ):
        loaded(*inputs.values())


def test_zero_sized_dimension_is_rejected(loaded):
    inputs = inputs_for(loaded, SIZES[0])
    inputs = {k: v[:0] for k, v in inputs.items()}
    with pytest.raises(ValueError, match=r"must be >= 1, got 0"):
        loaded(*inputs.values())


def test_truncated_file(saved, tmp_path):
    damaged = tmp_path / "model.jax"
    damaged.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    artifact.metadata_path(damaged).write_text(artifact.metadata_path(saved).read_text())
    with pytest.raises(ValueError, match="corrupted or truncated"):
        artifact.load(damaged)


def test_corrupted_file(saved, tmp_path):
    blob = bytearray(saved.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    damaged = tmp_path / "model.jax"
    damaged.write_bytes(bytes(blob))
    artifact.metadata_path(damaged).write_text(artifact.metadata_path(saved).read_text())
    with pytest.raises(ValueError, match="corrupted or truncated"):
        artifact.load(damaged)


def test_garbage_file_with_matching_metadata(loaded, tmp_path):
    # Even with metadata that vouches for it, bytes that are not an artifact
    # give a ValueError, not a crash.
    path = artifact.save(loaded.exported, tmp_path / "model.jax")
    path.write_bytes(b"not an artifact at all")
    meta = artifact.metadata_path(path)
    data = json.loads(meta.read_text())
    data["sha256"] = hashlib.sha256(b"not an artifact at all").hexdigest()
    meta.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="could not be deserialized"):
        artifact.load(path)


@pytest.fixture
def expired(loaded, tmp_path, monkeypatch):
    """The artifact as JAX wrote it before November 2025 (serialization format
    4 or older), by JAX's own flatbuffer builder: the device count in the old
    16-bit field, which JAX 0.11 and 0.12 refuse to read; 3 in the version
    field, what JAX wrote there whatever the format until July 2026; no JAX
    version (JAX 0.10 writes none: raising=False)."""
    add_version = flatbuffer.ExportedAddSerializationVersion
    with monkeypatch.context() as old_jax:
        old_jax.setattr(
            flatbuffer, "ExportedAddSerializationVersion", lambda b, _: add_version(b, 3)
        )
        old_jax.setattr(flatbuffer, "ExportedAddNrDevices", flatbuffer.ExportedAddNrDevicesShort)
        old_jax.setattr(flatbuffer, "ExportedAddJaxVersion", lambda b, _: None, raising=False)
        return artifact.save(loaded.exported, tmp_path / "old.jax")


RETIRES = pytest.mark.skipif(
    not artifact.retires_old_formats(),
    reason=f"jax {jax.__version__} retires no serialization format (JAX 0.11 is the first)",
)


def test_an_old_format_is_refused_with_the_fix_or_loads_before_jax_0_11(expired):
    assert json.loads(artifact.metadata_path(expired).read_text())["serialization_version"] == 3
    if not artifact.retires_old_formats():
        # JAX 0.10 reads the old 16-bit device count and has no expiry: the
        # artifact that JAX 0.11 and later refuse loads and computes here.
        old = artifact.load(expired)
        inputs = inputs_for(old, SIZES[1])
        assert_close(old(*inputs.values()), SPEC.oracle(*inputs.values()), VALUES)
        return
    with pytest.raises(ValueError, match="serialization version 3") as refused:
        artifact.load(expired)
    message = str(refused.value)
    assert "no longer reads its format" in message
    assert f"Re-export it from the model code: python -m {artifact.__package__} export" in message
    assert "JAX_EXPORT_DESERIALIZE_EXPIRED_VERSIONS=1" in message


@RETIRES
def test_expired_artifact_loads_with_the_escape_hatch(expired):
    previous = getattr(jax.config, artifact.EXPIRED_VERSIONS_FLAG)
    jax.config.update(artifact.EXPIRED_VERSIONS_FLAG, True)
    try:
        with pytest.warns(DeprecationWarning, match="6-month backward-compatibility window"):
            old = artifact.load(expired)
    finally:
        jax.config.update(artifact.EXPIRED_VERSIONS_FLAG, previous)
    inputs = inputs_for(old, SIZES[1])
    want = SPEC.oracle(*inputs.values())
    assert_close(old(*inputs.values()), want, VALUES)


def test_artifact_from_a_newer_jax_it_cannot_read_is_refused_clearly(saved, monkeypatch):
    # What JAX 0.10 does with an artifact from JAX 0.12 (see test_golden.py),
    # under any JAX: a newer exporter, a module this JAX cannot parse.
    meta = artifact.metadata_path(saved)
    data = json.loads(meta.read_text())
    meta.write_text(json.dumps(data | {"jax_version": "99.0.0"}))

    def unreadable(self, serialized=True):
        raise RuntimeError("INVALID_ARGUMENT: Failed to deserialize StableHLO")

    try:
        with monkeypatch.context() as older_jax:
            older_jax.setattr(export.Exported, "mlir_module", unreadable)
            with pytest.raises(artifact.ExportedByANewerJax) as refused:
                artifact.load(saved)
    finally:
        meta.write_text(json.dumps(data))
    message = str(refused.value)
    assert f"exported by jax 99.0.0, and jax {jax.__version__} cannot read its StableHLO" in message
    assert "Load it with jax 99.0.0 or later, or re-export it with this JAX" in message


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no artifact at"):
        artifact.load(tmp_path / "nothing.jax")
    (tmp_path / "lonely.jax").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="lonely.jax.json is missing"):
        artifact.load(tmp_path / "lonely.jax")


@pytest.mark.parametrize(
    ("constraint", "sizes", "holds"),
    [
        ("mod(b, 2) == 0", {"b": 4}, True),
        ("mod(b, 2) == 0", {"b": 5}, False),
        ("2*floordiv(b, 2) == b", {"b": 6}, True),
        ("b >= 2", {"b": 1}, False),
        ("max(b, 3) <= 3", {"b": 3}, True),
    ],
)
def test_constraints_are_read_as_jax_reads_them(constraint, sizes, holds):
    # What jax.export accepts as a constraint the input checks evaluate: a
    # divisibility constraint (floordiv, mod) works as JAX writes it.
    export.SymbolicScope([constraint])  # JAX itself accepts it
    assert artifact._holds(constraint, sizes) is holds


@pytest.mark.parametrize("constraint", ["b // 2 >= 1", "b % 2 == 0", "b > 1"])
def test_a_constraint_jax_refuses_is_an_error_naming_it(constraint):
    with pytest.raises(ValueError):
        export.SymbolicScope([constraint])  # JAX refuses it when the model is exported
    with pytest.raises(ValueError, match=re.escape(repr(constraint))):
        artifact._holds(constraint, {"b": 4})
