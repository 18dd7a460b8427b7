"""The machinery between the op's Python (`{{ cookiecutter.op_name }}.py`) and its C++ handlers:
registration of the FFI targets, the two FFI calls, the custom VJP that pairs
them into a differentiable op with the check that rows are not empty, and the
calls' sharding and batching rules, derived from one declaration of the
handlers' axes.

The handlers (csrc/) compute a row-wise op over the last axis of x: the
forward call returns y (x's shape and dtype) and one residual per row, the
backward call returns dx from x, the residual and the cotangent of y; both
take the op's attributes. The rows themselves, and what this module reads
of their declaration (the attributes' names, whether a row must be whole on
one device), are csrc/{{ cookiecutter.op_name }}_kernels.h.
"""

import math
from collections.abc import Callable
from functools import cache, partial, wraps
from operator import attrgetter
from typing import Any, ParamSpec, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.sharding_impls import parse_flatten_op_sharding
from jax.custom_batching import custom_vmap
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, Sharding
from jax.typing import DTypeLike

try:
    from . import _ffi
except ImportError as err:  # e.g. src/ on sys.path without a build
    raise ImportError(
        f"{__package__}._ffi, the compiled extension, is missing: build it with "
        "`python -m pip install -e .` (see README.md)"
    ) from err

OP = "{{ cookiecutter.op_name }}"
# Target names are process-wide: prefix them with the package name so that two
# projects generated from this template can be imported together.
_PREFIX = __name__.split(".")[0]
FORWARD = f"{_PREFIX}_{OP}_forward"
BACKWARD = f"{_PREFIX}_{OP}_backward"
TARGETS = (FORWARD, BACKWARD)
# The names of the handlers' attributes (kAttributeNames in the kernel file):
# none, one or several, each a float64, passed to both FFI calls.
ATTRIBUTES: tuple[str, ...] = tuple(_ffi.attributes)

# The handlers' axes, declared once: each FFI call's operands and results in
# the einsum-like notation of a Shardy sharding rule. "..." stands for x's
# leading axes (any number of them, each a batch of rows), "n" for its last
# axis, the row. REDUCED names the axes the handlers reduce over: a device
# must hold them whole, so they are gathered where they arrive split. The
# row, where the kernel file says a row must be whole (kNeedsWholeRows); none
# for an element-wise op. Every other axis stays split across devices as it
# comes, and each device runs the handler on its own block: the sharding rule
# and the per-device layouts below follow from these three lines, for any op
# the handlers compute.
FORWARD_AXES = "... n -> ... n, ..."  # x -> y, residual
BACKWARD_AXES = "... n, ..., ... n -> ... n"  # x, residual, cotangent -> dx
REDUCED = ("n",) if _ffi.needs_whole_rows else ()


def _register() -> None:
    # The CUDA handlers register even without a GPU; XLA only looks them up
    # when it compiles for one.
    for platform, capsules in (("cpu", _ffi.cpu_targets()), ("CUDA", _ffi.cuda_targets())):
        for direction, capsule in capsules.items():
            jax.ffi.register_ffi_target(f"{_PREFIX}_{OP}_{direction}", capsule, platform=platform)


_register()


def cuda_available() -> bool:
    """Whether this build of the extension contains the CUDA handler."""
    return bool(_ffi.cuda_targets())


def residual_dtype(dtype: DTypeLike) -> DTypeLike:
    """The residual's dtype: float64 for float64 x, else float32."""
    return jnp.float64 if dtype == jnp.float64 else jnp.float32


def _attributes(given: dict[str, Any]) -> tuple[tuple[str, np.float64], ...]:
    """The FFI calls' attributes: exactly ATTRIBUTES, as np.float64. Attributes
    are typed: the handlers decode each as a double, and a Python float would
    do too, but np.float32 or an int would fail while they decode the call."""
    if sorted(given) != sorted(ATTRIBUTES):
        raise TypeError(f"{OP}: the handlers take the attributes {ATTRIBUTES}, got {tuple(given)}")
    return tuple((name, np.float64(given[name])) for name in ATTRIBUTES)


# Whether a function wrapped by for_export is being traced: then the calls are
# plain FFI calls, else they go through custom_partitioning (see _partitioned).
# A JAX user context, not ambient Python state (a contextvars.ContextVar): its
# value is part of the key of every jit's trace and compile caches, so a jitted
# function that an export traces (a model under jax.jit, the calls' own jits)
# is traced afresh for the export, and a trace made for an export never
# serves a run (which would gather each call's operands onto every device), nor
# a run's trace an export (which would fail on custom_partitioning's callbacks).
_EXPORTING = jax.make_user_context(False)


A = ParamSpec("A")
R = TypeVar("R")


def for_export(f: Callable[A, R]) -> Callable[A, R]:
    """f, with the op's handlers called as plain FFI calls while it is traced:
    export `jax.jit(for_export(f))` where f calls the op on several devices.

    custom_partitioning, which splits the calls across devices, leaves Python
    callbacks in the lowered program, and jax.export cannot serialize those
    ("serialization of host_callbacks"). A plain FFI call exports; where the
    exported program is called on sharded arrays, XLA gathers the operands of
    each call onto every device (right values, more communication). To keep
    the rows where they lie, export a jax.shard_map of the op instead: inside
    shard_map the calls are plain already. A gradient exported with
    `serialize(vjp_order=1)` is traced after f: export `for_export(jax.grad(...))`
    as its own function instead.

    f may call jitted functions (a model under jax.jit) that the process also
    runs: the choice is part of what jit caches on (a jax.make_user_context),
    so each is traced once for runs and once for exports, in either order.
    """

    @wraps(f)
    def traced_for_export(*args: A.args, **kwargs: A.kwargs) -> R:
        with _EXPORTING(True):
            return f(*args, **kwargs)

    return traced_for_export


def forward(x: jax.Array, **attributes: float) -> tuple[jax.Array, jax.Array]:
    """(y, residual) from the forward handler, given the attributes by name."""
    y, residual = _FORWARD(_attributes(attributes), not _EXPORTING.value)(x)
    return y, residual


def backward(
    x: jax.Array, residual: jax.Array, cotangent: jax.Array, **attributes: float
) -> jax.Array:
    """dx from the backward handler, given the attributes by name."""
    dx: jax.Array
    (dx,) = _BACKWARD(_attributes(attributes), not _EXPORTING.value)(x, residual, cotangent)
    return dx


# --- The op: the two calls paired by a custom VJP ---------------------------------
Attributes: TypeAlias = tuple[tuple[str, float], ...]  # (name, value) pairs, hashable
Residuals: TypeAlias = tuple[jax.Array, jax.Array]  # x, and the forward's residual per row


def differentiable(
    backward_formula: Callable[..., jax.Array],
    forward_tangents: Callable[..., tuple[jax.Array, jax.Array]],
) -> Callable[..., jax.Array]:
    """The op, y from the forward handler, differentiable: op(x, **attributes).

    An ffi_call has no derivative. A jax.custom_vjp pairs the forward handler
    (which also returns the residual) with the backward one, so reverse mode
    runs only the handlers; forward mode (jvp, jacfwd) of a custom_vjp
    raises. Derivatives of the gradient (grad of grad, jax.hessian)
    differentiate the two handler calls themselves, so each call is a
    jax.custom_jvp whose tangent is plain JAX, which XLA fuses and JAX can
    transpose, given by the op's module:

    - backward_formula(x, residual, cotangent, **attributes): dx, what the
      backward handler computes;
    - forward_tangents(x, residual, t, **attributes): the tangents of y and of
      the residual for a tangent t of x.
    """

    @partial(jax.custom_jvp, nondiff_argnums=(1,))
    def forward_call(x: jax.Array, attributes: Attributes) -> tuple[jax.Array, jax.Array]:
        return forward(x, **dict(attributes))

    @forward_call.defjvp
    def forward_call_jvp(
        attributes: Attributes, primals: tuple[jax.Array], tangents: tuple[jax.Array]
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
        (x,), (t,) = primals, tangents
        y, residual = forward_call(x, attributes)
        return (y, residual), forward_tangents(x, residual, t, **dict(attributes))

    @partial(jax.custom_jvp, nondiff_argnums=(3,))
    def backward_call(
        x: jax.Array, residual: jax.Array, cotangent: jax.Array, attributes: Attributes
    ) -> jax.Array:
        return backward(x, residual, cotangent, **dict(attributes))

    @backward_call.defjvp
    def backward_call_jvp(
        attributes: Attributes,
        primals: tuple[jax.Array, jax.Array, jax.Array],
        tangents: tuple[jax.Array, jax.Array, jax.Array],
    ) -> tuple[jax.Array, jax.Array]:
        _, dx_t = jax.jvp(partial(backward_formula, **dict(attributes)), primals, tangents)
        return backward_call(*primals, attributes), dx_t

    @partial(jax.custom_vjp, nondiff_argnums=(1,))
    def op(x: jax.Array, attributes: Attributes) -> jax.Array:
        return forward_call(x, attributes)[0]

    def op_fwd(x: jax.Array, attributes: Attributes) -> tuple[jax.Array, Residuals]:
        y, residual = forward_call(x, attributes)
        return y, (x, residual)

    def op_bwd(
        attributes: Attributes, residuals: Residuals, cotangent: jax.Array
    ) -> tuple[jax.Array]:
        x, residual = residuals
        return (backward_call(x, residual, cotangent, attributes),)

    op.defvjp(op_fwd, op_bwd)

    def checked(x: jax.Array, **attributes: float) -> jax.Array:
        if x.ndim and x.shape[-1] == 0:
            # The handler refuses this too, but XLA skips a call whose used
            # results are all empty, so under jit only this check is sure to run.
            raise ValueError(
                f"{OP}: x has rows of length 0 (shape {x.shape}); the op needs at least one "
                "element per row"
            )
        return op(x, tuple(attributes.items()))

    return checked


def _forward_results(x: jax.Array) -> tuple[tuple[tuple[int, ...], DTypeLike], ...]:
    """The forward's results, (shape, dtype) each: y, and one residual per row."""
    return (x.shape, x.dtype), (x.shape[:-1], residual_dtype(x.dtype))


def _backward_results(x: jax.Array) -> tuple[tuple[tuple[int, ...], DTypeLike], ...]:
    """The backward's result, dx: x's shape and dtype."""
    return ((x.shape, x.dtype),)


# --- The declaration, read ---------------------------------------------------------
Axes: TypeAlias = tuple[str, ...]  # one array's axes in the declaration, e.g. ("...", "n")
Spec: TypeAlias = tuple[Any, ...]  # the mesh axes each axis of an array is split over
Layouts: TypeAlias = tuple[NamedSharding, ...]  # one per operand, or one per result
Results: TypeAlias = Callable[[jax.Array], tuple[tuple[tuple[int, ...], DTypeLike], ...]]


def _declared(axes: str) -> tuple[list[Axes], list[Axes]]:
    """The operands' and the results' axes of one FFI call's declaration."""
    operands, results = (
        [tuple(array.split()) for array in side.split(",")] for side in axes.split("->")
    )
    return operands, results


def _layout(x_axes: Axes, spec: Spec, ndim: int, reduced: Axes) -> tuple[Spec, dict[str, Any]]:
    """From x's spec (x declared with axes x_axes): the mesh axes of x's
    leading axes ("..."), and of each of its named axes, None for those in
    `reduced` (whole on every device)."""
    spec = tuple(spec) + (None,) * (ndim - len(spec))
    names = [a for a in x_axes if a != "..."]
    leading = ndim - len(names)
    named = {a: None if a in reduced else s for a, s in zip(names, spec[leading:], strict=True)}
    return spec[:leading], named


def _spec(axes: Axes, leading: Spec, named: dict[str, Any]) -> jax.P:
    """An array's spec, from its declared axes and x's layout."""
    return jax.P(*(s for a in axes for s in (leading if a == "..." else (named[a],))))


# The mesh axes that a shard_map leaves to the partitioner (axis_names=...):
# each (name, size), in mesh order.
FreeAxes: TypeAlias = tuple[tuple[str, int], ...]


def _free_axes(x: jax.Array) -> FreeAxes:
    """The free mesh axes where x is traced inside a shard_map that leaves some
    (none elsewhere: there the partitioner names x's mesh itself)."""
    mesh = jax.typeof(x).sharding.mesh
    if not mesh.manual_axes:
        return ()
    kinds = zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
    return tuple((name, size) for name, size, kind in kinds if kind != AxisType.Manual)


def _on_free_axes(sharding: Sharding, ndim: int, free: FreeAxes) -> tuple[Mesh, Spec]:
    """x's mesh and spec inside a shard_map that leaves the axes `free`.

    There the partitioner hands the callback no mesh: x's sharding is XLA's
    tiling (a GSPMDSharding) over one group of devices, those the free axes
    span, numbered within the group. Read over a mesh of the free axes, it is
    a spec like any other. The mesh's devices are the group's positions: the
    handler runs on each device's block alone, so which devices they are does
    not matter. (JAX has no public reader of an XLA tiling: this one is
    internal, jax._src.)
    """
    names, sizes = zip(*free, strict=True)
    devices = sorted(sharding.device_set, key=attrgetter("id"))[: math.prod(sizes)]
    mesh = Mesh(np.array(devices).reshape(sizes), names)
    (spec,) = parse_flatten_op_sharding(sharding._to_xla_hlo_sharding(ndim), mesh)
    return mesh, tuple(spec)


# --- The calls: sharding and batching rules from the declaration ---------------------
def _ffi_call(
    target: str,
    axes: str,
    results: Results,
    attributes: tuple[tuple[str, Any], ...],
    operands: tuple[jax.Array, ...],
    typed: bool,
) -> Any:
    """The FFI call itself, on whole arrays (typed) or on one device's blocks.

    ffi_call gives its results exactly the types declared. Typed, they are
    built from jax.typeof(x): x's mesh, each result laid out as the
    declaration says (under an explicit-axes mesh a sharding is part of the
    type, and the plain-JAX op's y is sharded like x), and x's varying
    manual axes (inside shard_map a bare ShapeDtypeStruct declares a value
    that is the same on every device, and x's block is not).
    """
    x = operands[0]
    x_type = jax.typeof(x)
    mesh = x_type.sharding.mesh
    (x_axes, *_), result_axes = _declared(axes)
    # Untyped, too, where x lacks a declared axis (a scalar): the handler refuses it.
    typed = typed and not mesh.empty and x.ndim >= len(x_axes) - x_axes.count("...")
    types = []
    for (shape, dtype), declared in zip(results(x), result_axes, strict=True):
        if not typed:
            types.append(jax.ShapeDtypeStruct(shape, dtype))
            continue
        leading, named = _layout(x_axes, x_type.sharding.spec, x.ndim, ())
        sharding = NamedSharding(mesh, _spec(declared, leading, named))
        types.append(
            jax.ShapeDtypeStruct(
                shape, dtype, sharding=sharding, manual_axis_type=x_type.manual_axis_type
            )
        )
    return jax.ffi.ffi_call(target, tuple(types))(*operands, **dict(attributes))


def _partitioned(target: str, axes: str, results: Results) -> Callable[..., Any]:
    """The FFI call `target` as an op XLA can split across devices:
    attributes -> a function of the operands, returning a tuple of results.

    XLA cannot partition a custom call it knows nothing about: given a sharded
    operand it gathers it whole onto every device first. custom_partitioning
    tells it how: Shardy (JAX's partitioner) propagates shardings through the
    call by the declaration (`axes`, REDUCED replicated), and `partition`
    gives each device the FFI call on its own rows. Under jit with auto or
    explicit mesh axes alike, and over the axes a shard_map leaves free;
    inside a shard_map over every axis the call runs as it is.
    custom_partitioning has no batching rule: custom_vmap adds the one that
    a row-wise op needs (the vmapped axis is one more leading axis).
    Unpartitioned (for_export), it is the plain FFI call.
    """
    operand_axes, result_axes = _declared(axes)

    def plain(attributes: tuple[tuple[str, Any], ...], *operands: jax.Array) -> Any:
        return _ffi_call(target, axes, results, attributes, operands, typed=True)

    @partial(custom_partitioning, static_argnums=(0, 1))
    def call(attributes: tuple[tuple[str, Any], ...], free: FreeAxes, *operands: jax.Array) -> Any:
        del free  # only the partition callback reads it
        return plain(attributes, *operands)

    def partition(
        attributes: tuple[tuple[str, Any], ...],
        free: FreeAxes,
        mesh: Mesh | AbstractMesh,
        arg_shapes: tuple[jax.ShapeDtypeStruct, ...],
        result_shape: Any,
    ) -> tuple[Mesh | AbstractMesh, Callable[..., Any], Layouts, Layouts]:
        del result_shape
        x = arg_shapes[0]
        if isinstance(x.sharding, NamedSharding):
            mesh, spec = x.sharding.mesh, tuple(x.sharding.spec)
        elif free:  # inside a shard_map, over the axes it leaves free
            mesh, spec = _on_free_axes(x.sharding, len(x.shape), free)
        else:  # a program that names no mesh: keep every operand whole
            devices = sorted(x.sharding.device_set, key=attrgetter("id"))
            mesh, spec = Mesh(np.array(devices), ("devices",)), ()
        leading, named = _layout(operand_axes[0], spec, len(x.shape), REDUCED)

        def on_device(*blocks: jax.Array) -> Any:
            return _ffi_call(target, axes, results, attributes, blocks, typed=False)

        def shardings(arrays: list[Axes]) -> Layouts:
            return tuple(NamedSharding(mesh, _spec(a, leading, named)) for a in arrays)

        return mesh, on_device, shardings(result_axes), shardings(operand_axes)

    call.def_partition(partition, sharding_rule=axes, need_replication_factors=REDUCED)

    @cache
    def with_attributes(
        attributes: tuple[tuple[str, Any], ...], partitioned: bool
    ) -> Callable[..., Any]:
        @custom_vmap
        def batchable(*operands: jax.Array) -> Any:
            if not partitioned:
                return plain(attributes, *operands)
            return call(attributes, _free_axes(operands[0]), *operands)

        @batchable.def_vmap
        def rule(axis_size: int, in_batched: list[bool], *operands: jax.Array) -> Any:
            # The vmapped axis arrives first; to a row-wise op it is one more
            # leading axis: one call for the whole batch, not a loop. An
            # unbatched operand (a closed-over cotangent under vmap(grad))
            # is broadcast along it.
            operands = tuple(
                a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))
                for a, batched in zip(operands, in_batched, strict=True)
            )
            return batchable(*operands), (True,) * len(result_axes)

        # jit: called eagerly, too, the partitioner splits the call (one
        # compiled program per attribute value and operand type, cached).
        # `partitioned` picks one of two cached jits: a trace cached with
        # custom_partitioning must never serve an export.
        return jax.jit(batchable)

    return with_attributes


_FORWARD = _partitioned(FORWARD, FORWARD_AXES, _forward_results)
_BACKWARD = _partitioned(BACKWARD, BACKWARD_AXES, _backward_results)
