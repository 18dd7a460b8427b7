{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Export the model with jax.export, write it to disk with its metadata, load
it back and call it with checked inputs.

What is exported, and with which input signature and constraints, is declared
in {{ cookiecutter.op_name }}.py; this module works from that declaration.
An artifact is two files: NAME.jax (the serialized jax.export.Exported) and
NAME.json (what was exported, by which JAX, and the SHA-256 of NAME.jax).
"""

import datetime
import hashlib
import json
import operator
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from flatbuffers import encode, number_types, packer, table
from jax import export
from jax.typing import ArrayLike

from .{{ cookiecutter.op_name }} import CONSTRAINTS, INPUTS, exported_function

PLATFORMS = ("{{ cookiecutter.platforms.split(',') | join('", "') }}"{% if "," not in cookiecutter.platforms %},{% endif %})
VJP_ORDER = {{ cookiecutter.vjp_order }}  # 0: the artifact cannot be differentiated
# The configuration option (and, upper-cased, the environment variable) that
# lets JAX load an artifact whose serialization format it has retired.
EXPIRED_VERSIONS_FLAG = "jax_export_deserialize_expired_versions"
# jax.Device.platform and jax.default_backend() say "gpu" on NVIDIA and AMD
# GPUs alike; jax.export records which one ("cuda" or "rocm").
_DEVICE_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm")}
# How many input signatures an Artifact remembers as checked, the least
# recently used forgotten first: a caller that feeds ever new shapes would
# otherwise grow the record without bound (jax.jit bounds its caches too). A
# forgotten signature is only checked again, in microseconds.
CHECKED_SIGNATURES = 128
# An artifact's metadata, NAME.json as json.load reads it.
Metadata: TypeAlias = dict[str, Any]
# Arrays by input name, as random_inputs makes them and np.load reads them.
Inputs: TypeAlias = dict[str, npt.NDArray[Any]]
StrPath: TypeAlias = str | os.PathLike[str]
# What the input checks depend on: each input's shape and dtype.
Signature: TypeAlias = tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]


def input_specs() -> list[jax.ShapeDtypeStruct]:
    """Abstract inputs with symbolic dimensions, all in one scope so that
    arguments sharing a name share a size and the constraints apply to all."""
    scope = export.SymbolicScope(CONSTRAINTS)
    return [
        jax.ShapeDtypeStruct(export.symbolic_shape(shape, scope=scope), jnp.dtype(dtype))
        for _, shape, dtype in INPUTS
    ]


def input_metadata() -> list[dict[str, str]]:
    """INPUTS as the metadata file records them."""
    return [{"name": name, "shape": shape, "dtype": dtype} for name, shape, dtype in INPUTS]


def export_model(params: Any = None, platforms: Sequence[str] = PLATFORMS) -> export.Exported:
    """Trace and lower the declared function with the weights baked in as
    constants: params, or by default its own (exported_function's)."""
    function = exported_function(params)
    return export.export(jax.jit(function), platforms=platforms)(*input_specs())


def save(exported: export.Exported, path: StrPath, vjp_order: int = VJP_ORDER) -> Path:
    """Write PATH (the serialized artifact) and PATH.json (its metadata)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = exported.serialize(vjp_order=vjp_order)
    path.write_bytes(blob)
    metadata = {
        "jax_version": jax.__version__,
        "jaxlib_version": version("jaxlib"),
        # What decides whether a newer JAX can still load the file (not its date).
        "serialization_version": serialization_version(blob),
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "vjp_order": vjp_order,
        "inputs": input_metadata(),
        "outputs": [
            {"shape": ", ".join(map(str, aval.shape)), "dtype": str(aval.dtype)}
            for aval in exported.out_avals
        ],
        "constraints": list(CONSTRAINTS),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "size_bytes": len(blob),
    }
    metadata_path(path).write_text(json.dumps(metadata, indent=2) + "\n")
    return path


def metadata_path(path: StrPath) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".json")


def serialization_version(blob: bytes | bytearray) -> int:
    """The serialization format version JAX wrote into a serialized artifact.

    JAX refuses to load a format some six months after replacing it with a
    newer one, however recent the file itself is. (JAX before July 2026,
    serialization version 12, wrote 3 here whatever the format.)"""
    # jax.export has no public accessor for it. It is field 0 of the file's
    # root table, a uint16; JAX's flatbuffer schema only ever appends fields,
    # so this read does not depend on JAX's private generated reader.
    buffer = bytearray(blob)
    root = table.Table(buffer, encode.Get(packer.uoffset, buffer, 0))
    field = root.Offset(4)  # vtable slot of field 0
    return int(root.Get(number_types.Uint16Flags, root.Pos + field)) if field else 0


def retires_old_formats() -> bool:
    """Whether this JAX refuses a serialization format it has retired, and has
    EXPIRED_VERSIONS_FLAG to load one anyway: JAX 0.11 and later. JAX 0.10
    reads every format from 2 on (the device count in the old 16-bit field
    included) and has no such flag, so there an old artifact simply loads."""
    return hasattr(jax.config, EXPIRED_VERSIONS_FLAG)


@cache
def current_serialization_version() -> int:
    """The serialization format version this JAX writes."""
    tiny = export.export(jax.jit(jnp.negative))(jax.ShapeDtypeStruct((), jnp.float32))
    return serialization_version(tiny.serialize())


def platform_error(exported_platforms: Sequence[str], platform: str) -> str | None:
    """Why an artifact exported for `exported_platforms` cannot run on
    `platform`, or None when it can.

    Pass the canonical name that jax.export records, as
    export.default_export_platform() gives it ("cpu", "cuda", "rocm", "tpu").
    A device's own name "gpu" matches an artifact for cuda or for rocm, as it
    does not say which; Exported.call then tells the two apart."""
    candidates = _DEVICE_PLATFORM_ALIASES.get(platform, (platform,))
    if any(name in exported_platforms for name in candidates):
        return None
    wanted = " or ".join(candidates)
    return (
        f"this artifact was exported for {', '.join(exported_platforms)}, not for "
        f"{platform}; re-export it with {wanted} in its platforms"
    )


def check_platform(
    exported_platforms: Sequence[str], args: Sequence[ArrayLike]
) -> jax.Device | None:
    """Refuse inputs that jax.jit would run on a platform the artifact lacks,
    or say where else to run them: None to run them where jax.jit puts them,
    or the device to move them to first.

    Inputs committed to a device (by jax.device_put, or computed from
    committed inputs) run on that device's platform: a CPU array on a GPU host
    runs on the CPU, and a GPU array is refused by a CPU-only artifact.
    Uncommitted ones (NumPy arrays, Python scalars) would run on the default
    device (default_platform): where the artifact lacks its platform, they go
    to a device of one it has instead (choose_device: a CPU-only artifact on a
    GPU host runs on the CPU), unless jax.default_device pinned that device:
    then they are refused, naming the platform they would have run on."""
    platforms: set[str] = set()
    for arg in args:
        if isinstance(arg, jax.core.Tracer):
            # Traced (under jit, vmap, grad or another export): the platforms
            # are chosen when the enclosing computation is lowered, perhaps
            # several at once, and Exported.call checks each of them then
            # ("exported for platforms ... but it is used on ...").
            return None
        if isinstance(arg, jax.Array) and arg.committed:
            # A device's own name: "gpu" on NVIDIA and AMD GPUs alike.
            platforms.update(device.platform for device in arg.devices())
    if not platforms:
        here = default_platform()
        if (error := platform_error(exported_platforms, here)) is None:
            return None
        if jax.config.jax_default_device is not None:
            # The caller pinned the device (jax.default_device): refuse,
            # rather than run somewhere else than they asked.
            raise ValueError(error)
        return choose_device(exported_platforms, available_devices())
    # Inputs on two platforms are refused by jax.jit itself.
    for platform in sorted(platforms):
        if error := platform_error(exported_platforms, platform):
            raise ValueError(error)
    return None


def default_platform() -> str:
    """The platform that uncommitted inputs (NumPy arrays, Python scalars)
    run on, as jax.export names it: that of jax_default_device where it is
    set (a Device or a platform name: jax.default_device, or a project that
    pins its work to the CPU on an accelerator host), else the default
    backend's. The canonical name ("cuda"), as the artifact records it; not
    jax.devices()[0].platform, which is "gpu" on an NVIDIA GPU."""
    default = jax.config.jax_default_device
    if default is None:
        return export.default_export_platform()
    platform: str = getattr(default, "platform", default)
    backend = export.default_export_platform()
    # "gpu" is the default backend's GPU, whose canonical name JAX knows.
    return backend if backend in _DEVICE_PLATFORM_ALIASES.get(platform, ()) else platform


def available_devices() -> dict[str, list[jax.Device]]:
    """This process's devices by canonical platform name, in order of
    preference: the default backend's first, then the CPU's (which every JAX
    has, unless JAX_PLATFORMS leaves it out)."""
    devices = {export.default_export_platform(): list(jax.devices())}
    if "cpu" not in devices:
        try:
            devices["cpu"] = list(jax.devices("cpu"))
        except RuntimeError:  # JAX_PLATFORMS without cpu
            pass
    return devices


def choose_device(exported_platforms: Sequence[str], devices: Mapping[str, Sequence[Any]]) -> Any:
    """Where to run an artifact exported for `exported_platforms`: the first
    device of the first platform in `devices` (canonical name -> devices, in
    order of preference, as available_devices gives them) that the artifact
    was exported for. A ValueError that says what to re-export when there is
    none."""
    for platform, candidates in devices.items():
        if platform in exported_platforms and candidates:
            return candidates[0]
    here = [platform for platform, candidates in devices.items() if candidates]
    wanted = here[0] if here else "this process's platform"
    raise ValueError(
        f"this artifact was exported for {', '.join(exported_platforms)}, not for "
        f"{' or '.join(here) or 'any platform here'}; re-export it with {wanted} in its platforms"
    )


class Artifact:
    """A loaded artifact. Calling it checks the inputs against the metadata
    first, so a mistake gets a message that names it.

    The input checks depend only on the inputs' shapes and dtypes, so they
    run once per input signature; later calls with one of the
    CHECKED_SIGNATURES most recently used signatures cost a dict lookup.
    (Sharding is not part of the signature: the checks do not depend on it,
    and jax.jit keys its own cache on it.) The platform check depends on the
    devices the inputs are on, so it runs on every call (check_platform); it
    moves inputs that would run on a platform the artifact lacks to one it
    has (a CPU-only artifact on a GPU host runs on the CPU).
    The call (composable_call:
    exported.call with vmap, grad and shard_map rules) is wrapped in jax.jit:
    called bare, it traces the artifact's call again on every call,
    which costs more than the call itself on small inputs; jitted, that work
    is done once per signature too."""

    def __init__(self, exported: export.Exported, metadata: Metadata):
        self.exported = exported
        self.metadata = metadata
        self._call = jax.jit(composable_call(exported))
        # The input signatures that passed the checks, least recently used
        # first, at most CHECKED_SIGNATURES of them. Failures are not
        # recorded: a bad input raises on every call.
        self._checked: OrderedDict[Signature, None] = OrderedDict()

    def __call__(self, *args: ArrayLike) -> jax.Array:
        # Arrays (NumPy, JAX, tracers) carry their own shape and dtype: the fast,
        # common case. The dtype is the caller's, as input_dtype reads it.
        try:
            signature = tuple([(arg.shape, arg.dtype) for arg in args])  # type: ignore[union-attr]
        except AttributeError:  # Python scalars and lists
            signature = tuple([(np.shape(arg), input_dtype(arg)) for arg in args])
        if signature in self._checked:
            self._checked.move_to_end(signature)  # now the most recently used
        else:
            check_inputs(self.metadata, args)
            self._checked[signature] = None
            if len(self._checked) > CHECKED_SIGNATURES:
                self._checked.popitem(last=False)  # the least recently used
        if (device := check_platform(self.exported.platforms, args)) is not None:
            # Not where jax.jit would put them (the default device): where the
            # artifact runs. Lists become arrays first: device_put would take
            # a list for a tree of scalars.
            arrays = [a if isinstance(a, jax.Array) else np.asarray(a) for a in args]
            args = tuple(jax.device_put(arrays, device))
        # Exported.call is unannotated in JAX; the model returns one array.
        output: jax.Array = self._call(*args)
        return output


def composable_call(exported: export.Exported) -> Callable[..., jax.Array]:
    """exported.call, made to compose with vmap, grad and shard_map.

    JAX's own wrapper has no vmap rule (call_exported has no batching rule),
    and its results and cotangents drop the varying mesh axes of their inputs
    inside shard_map (so grad there fails on a cotangent type mismatch, and a
    wrong out_specs goes unnoticed). Here the artifact and each VJP it was
    serialized with are called by our own custom_vjp (_differentiable): every
    call folds vmap's axis into the symbolic batch dimension and gives its
    results the varying axes of the inputs. Differentiable as many times as
    the artifact's vjp_order (VJP_ORDER when save wrote it), and a clear
    ValueError beyond."""
    call = _differentiable(exported, order=0)
    return lambda *args: call(*args)[0]  # the model returns one array


def _differentiable(exported: export.Exported, order: int) -> Callable[..., tuple[jax.Array, ...]]:
    """The artifact (order 0) or its order-th VJP, called on its inputs of
    dtype other than float0, returning its results of dtype other than float0
    (_called), differentiable by its own VJP if it was serialized with one.

    A VJP takes the inputs of the function it differentiates, then one
    cotangent per result of that function; it returns one cotangent per
    input of that function, each of its input's type (the order-th VJP's
    results vary like the inputs they are cotangents of)."""
    called = _called(exported, cotangents=order > 0)
    call = jax.custom_vjp(_folding_vmap_axis_into_batch(called))

    def forward(*args: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
        return call(*args), args

    def backward(
        args: tuple[jax.Array, ...], cts: tuple[jax.Array, ...]
    ) -> tuple[jax.Array | None, ...]:
        if not exported.has_vjp():
            raise ValueError(_beyond_the_saved_order(order))
        # Built when needed, not in advance: a freshly exported (not loaded)
        # artifact has VJPs of every order.
        float_cts = iter(_differentiable(exported.vjp(), order + 1)(*args, *cts))
        # Cotangents of the float inputs only: the others (masks) have none.
        return tuple(next(float_cts) if _inexact(a) else None for a in args)

    call.defvjp(forward, backward)
    return call


def _beyond_the_saved_order(order: int) -> str:
    """Why the artifact cannot be differentiated order + 1 times."""
    if order == 0:
        return (
            "this artifact cannot be differentiated: it was serialized without its VJP "
            "(vjp_order=0); re-export it with save(..., vjp_order=1)"
        )
    times = "twice" if order == 1 else f"{order + 1} times"
    return (
        f"this artifact cannot be differentiated {times}: it was serialized with "
        f"vjp_order={order}; re-export it with save(..., vjp_order={order + 1})"
    )


def _called(exported: export.Exported, cotangents: bool) -> Callable[..., tuple[jax.Array, ...]]:
    """exported.call on the inputs of dtype other than float0, returning the
    results of dtype other than float0.

    A VJP of the artifact takes a float0 cotangent for each result that has
    no derivative (the cotangent of a mask), and returns one for each such
    input: float0 arrays are no values to pass through vmap or shard_map, so
    they are made here and dropped here."""

    def call(*args: jax.Array) -> tuple[jax.Array, ...]:
        inputs = _with_float0_inputs(exported, args)
        results = jax.tree.leaves(exported.call(*inputs))  # Exported.call is unannotated
        kept = [
            (i, r)
            for i, (r, aval) in enumerate(zip(results, exported.out_avals, strict=True))
            if aval.dtype != jax.dtypes.float0
        ]
        if cotangents:  # result i is the cotangent of input i: of its type
            return tuple(_varying_like(r, [inputs[i]]) for i, r in kept)
        return tuple(_varying_like(r, args) for _, r in kept)

    return call


def _with_float0_inputs(exported: export.Exported, args: Sequence[jax.Array]) -> list[Any]:
    """args with zeros of dtype float0 where exported takes them. Their
    shapes are symbolic (b, s): each dimension has the size it has in the
    other inputs."""
    avals = exported.in_avals
    given = [aval for aval in avals if aval.dtype != jax.dtypes.float0]
    sizes = {
        dim: size
        for aval, arg in zip(given, args, strict=True)
        for dim, size in zip(aval.shape, np.shape(arg), strict=True)
    }
    supplied = iter(args)
    return [
        np.zeros([sizes[dim] for dim in aval.shape], jax.dtypes.float0)
        if aval.dtype == jax.dtypes.float0
        else next(supplied)
        for aval in avals
    ]


def _inexact(x: jax.Array) -> bool:
    return bool(jnp.issubdtype(x.dtype, jnp.inexact))


T = TypeVar("T")


def _varying_like(out: T, args: Sequence[jax.Array]) -> T:
    """out, varying over every manual mesh axis (inside shard_map) that any
    of args varies over: what each shard computes differs per shard."""
    axes = set().union(*(jax.typeof(a).manual_axis_type.varying for a in args))

    def vary(x: jax.Array) -> jax.Array:
        missing = tuple(sorted(axes - jax.typeof(x).manual_axis_type.varying))
        varied: jax.Array = jax.lax.pcast(x, missing, to="varying")
        return varied

    varying: T = jax.tree.map(vary, out)
    return varying


F = TypeVar("F", bound=Callable[..., Any])


def _folding_vmap_axis_into_batch(fn: F) -> F:
    """fn, whose inputs and outputs all have the batch dimension b first, with
    a vmap rule: vmap's axis folds into b, (n, b, ...) -> (n*b, ...), so the
    artifact runs once on the whole batch, as it was exported to."""
    folded = jax.custom_batching.custom_vmap(fn)

    @folded.def_vmap
    def rule(axis_size: int, in_batched: Sequence[bool], *args: jax.Array) -> tuple[Any, Any]:
        args = tuple(
            a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))
            for a, batched in zip(args, in_batched, strict=True)
        )
        # Under Explicit mesh axes the folded batch must stay split as it
        # comes: a whole vmapped axis before a split batch cannot merge with
        # it (JAX refuses the reshape), so there the batch goes first, each
        # of its rows' vmapped copies after it (rows are independent).
        first = next(a for a, batched in zip(args, in_batched, strict=True) if batched)
        spec = (*jax.typeof(first).sharding.spec, None, None)
        batch_first = spec[0] is None and spec[1] is not None
        if batch_first:
            args = tuple(jnp.swapaxes(a, 0, 1) for a in args)
        # folded, not fn: inside an outer vmap, its rule folds again.
        out = folded(*(a.reshape(-1, *a.shape[2:]) for a in args))

        def unfold(o: jax.Array) -> jax.Array:
            if batch_first:
                return jnp.swapaxes(o.reshape(-1, axis_size, *o.shape[1:]), 0, 1)
            return o.reshape(axis_size, -1, *o.shape[1:])

        return jax.tree.map(unfold, out), jax.tree.map(lambda _: True, out)

    return folded  # type: ignore[return-value]


def load(path: StrPath) -> Artifact:
    """Read and verify an artifact; every failure is a ValueError or
    FileNotFoundError that says what is wrong with which file."""
    path = Path(path)
    if not path.is_file():
        command = f"python -m {__package__} export --out {path}"
        raise FileNotFoundError(f"no artifact at {path}; create one with: {command}")
    meta_file = metadata_path(path)
    if not meta_file.is_file():
        raise FileNotFoundError(
            f"{meta_file} is missing; it is written next to the artifact "
            "by export and is needed to check it"
        )
    try:
        metadata = json.loads(meta_file.read_text())
        expected_hash = metadata["sha256"]
    except (ValueError, KeyError) as err:
        raise ValueError(f"{meta_file} is not valid artifact metadata: {err}") from None
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != expected_hash:
        raise ValueError(
            f"{path} is corrupted or truncated ({len(blob)} bytes, expected "
            f"{metadata.get('size_bytes', '?')}; SHA-256 mismatch); re-export it"
        )
    try:
        exported = export.deserialize(bytearray(blob))
    except Exception as err:  # flatbuffers raises assorted errors on bad bytes
        raise ValueError(deserialize_error(path, metadata, err)) from None
    exported_by = str(metadata.get("jax_version", "?"))
    if _release(exported_by) > _release(jax.__version__):
        # JAX reads what older releases wrote, not always what newer ones did:
        # JAX 0.10 cannot read the StableHLO that JAX 0.12 writes. It would
        # fail at the first call, deep in JAX; parse the module now instead.
        try:
            exported.mlir_module()
        except Exception as err:
            raise ExportedByANewerJax(
                f"{path} was exported by jax {exported_by}, and jax {jax.__version__} cannot "
                f"read its StableHLO ({type(err).__name__}: {err}); JAX reads artifacts "
                f"from older releases, not from newer ones. Load it with jax {exported_by} "
                f"or later, or re-export it with this JAX: python -m {__package__} export "
                f"--out {path}"
            ) from None
    return Artifact(exported, metadata)


class ExportedByANewerJax(ValueError):
    """load's error for an artifact that this (older) JAX cannot read."""


def _release(jax_version: str) -> tuple[int, ...]:
    """A JAX version's numbers, to compare releases: "0.12.0.1" -> (0, 12, 0, 1)."""
    return tuple(int(n) for n in re.findall(r"\d+", jax_version.split("dev")[0]))


def deserialize_error(path: Path, metadata: Metadata, err: Exception) -> str:
    """What went wrong, and what to do about it."""
    origin = (
        f"exported by jax {metadata.get('jax_version', '?')} in serialization version "
        f"{metadata.get('serialization_version', '?')}"
    )
    # JAX's ValueError for a serialization format it has retired.
    if "compatibility window" in str(err):
        return (
            f"{path} ({origin}) is too old for jax {jax.__version__}, which no longer reads "
            "its format (JAX keeps reading a format for six months after replacing it). "
            f"Re-export it from the model code: python -m {__package__} export --out {path}. "
            f"Until you can, setting {EXPIRED_VERSIONS_FLAG} (jax.config.update, or the "
            f"environment variable {EXPIRED_VERSIONS_FLAG.upper()}=1) may still load it, "
            "with no guarantee that it works or computes the same."
        )
    return (
        f"{path} ({origin}) could not be deserialized by jax {jax.__version__}: "
        f"{type(err).__name__}: {err}"
    )


def input_dtype(arg: ArrayLike) -> np.dtype[Any]:
    """The argument's own dtype, not JAX's canonical one: with x64 disabled
    JAX would quietly turn a float64 array into float32."""
    dtype = getattr(arg, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(arg).dtype


def check_inputs(metadata: Metadata, args: Sequence[ArrayLike]) -> None:
    """Ranks, dtypes, static sizes, shared dimension variables, constraints.

    Symbolic sizes (inputs traced inside another export) are left to
    Exported.call: see below."""
    specs = metadata["inputs"]
    if len(args) != len(specs):
        names = ", ".join(s["name"] for s in specs)
        raise TypeError(f"the artifact takes {len(specs)} inputs ({names}), got {len(args)}")
    shapes = [np.shape(arg) for arg in args]
    for spec, arg, shape in zip(specs, args, shapes, strict=True):
        dtype = input_dtype(arg)
        rank = len(spec["shape"].split(","))
        if len(shape) != rank:
            raise ValueError(
                f"{spec['name']} must have rank {rank} ({spec['shape']}), got shape {shape}"
            )
        if dtype != np.dtype(spec["dtype"]):
            raise TypeError(f"{spec['name']} must be {spec['dtype']}, got {dtype}; cast it first")
    if any(export.is_symbolic_dim(size) for shape in shapes for size in shape):
        # Comparing symbolic sizes here can be inconclusive: s <= 128 is,
        # in a caller's scope without that constraint. Exported.call checks
        # them symbolically, in the caller's scope; what it cannot decide
        # when exporting is checked when the caller's artifact runs.
        return
    sizes: dict[str, int] = {}
    for spec, shape in zip(specs, shapes, strict=True):
        name, dims = spec["name"], [d.strip() for d in spec["shape"].split(",")]
        for axis, (dim, size) in enumerate(zip(dims, shape, strict=True)):
            if dim.isdigit():
                if size != int(dim):
                    raise ValueError(f"{name}.shape[{axis}] must be {dim}, got {size}")
            elif size < 1:
                raise ValueError(f"{name}.shape[{axis}] ({dim}) must be >= 1, got {size}")
            elif sizes.setdefault(dim, size) != size:
                raise ValueError(
                    f"dimension {dim} is {sizes[dim]} in one input and {size} "
                    f"in {name}.shape[{axis}]; they must agree"
                )
    for constraint in metadata["constraints"]:
        if not _holds(constraint, sizes):
            values = ", ".join(f"{k}={v}" for k, v in sizes.items())
            raise ValueError(f"inputs violate the artifact's constraint {constraint!r} ({values})")


def random_inputs(metadata: Metadata, *, batch: int{% if seq %}, seq: int{% endif %}, seed: int) -> Inputs:
    """Random inputs matching the artifact's input signature."""
    rng = np.random.default_rng(seed)
    sizes = {"b": batch{% if seq %}, "s": seq{% endif %}}
    inputs: Inputs = {}
    for spec in metadata["inputs"]:
        dims = [d.strip() for d in spec["shape"].split(",")]
        shape = [int(d) if d.isdigit() else sizes[d] for d in dims]
        if spec["dtype"] == "bool":
            inputs[spec["name"]] = rng.random(shape) < 0.8
        else:
            inputs[spec["name"]] = rng.standard_normal(shape).astype(spec["dtype"])
    return inputs


# jax.export's comparators, in the order its parser looks for them.
_COMPARATORS: tuple[tuple[str, Callable[[int, int], bool]], ...] = (
    ("==", operator.eq),
    (">=", operator.ge),
    ("<=", operator.le),
)


def _holds(constraint: str, sizes: Mapping[str, int]) -> bool:
    """Whether sizes meet a jax.export constraint ("s <= 128", "mod(b, 2) == 0"),
    each side read by JAX's own parser and evaluated by the evaluator its shape
    checks use: whatever JAX accepts as a constraint works here, and one it
    rejects is an error naming it."""
    for comparator, compare in _COMPARATORS:
        left, found, right = constraint.partition(comparator)
        if found:
            return compare(_size(left, sizes, constraint), _size(right, sizes, constraint))
    raise ValueError(f"constraint {constraint!r} has none of ==, >=, <= (jax.export's forms)")


def _size(expression: str, sizes: Mapping[str, int], constraint: str) -> int:
    try:
        (dim,) = export.symbolic_shape(expression, scope=export.SymbolicScope())
    except ValueError as err:
        raise ValueError(f"constraint {constraint!r}: {err}") from None
    if isinstance(dim, int):
        return dim
    # _evaluate is private, and the one evaluator JAX has (every JAX in the
    # project's range has it, with this signature); tests/test_artifact.py
    # holds it to divisibility constraints.
    env: dict[str, Any] = dict(sizes)  # JAX types its values as arrays; ints evaluate alike
    return int(dim._evaluate(env))
