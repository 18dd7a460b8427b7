"""What composes a Pallas kernel with the rest of JAX, whatever the op and the
backend; the op module and partitioning.py build on it, and nothing here is
specific to one op:

- the implementation switch (implement): "auto" | "kernel" | "reference",
  which an environment variable may override, "auto" chosen per platform the
  program is lowered for (per_lowering_platform), or in an eager call by the
  devices its arrays are on, not by the host that traces it;
- pallas_call's result types inside jax.shard_map (vary_alike);
- the kernel per shard under Explicit mesh axes (per_shard), and per shard of
  a vmapped batch split over them (batches_per_shard);
- derivatives of a kernel call, taken through its plain-JAX twin
  (kernel_call), so that second order works.
"""

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar, cast, get_args

import jax
from jax.sharding import ManualAxisType, NamedSharding
from jax.sharding import PartitionSpec as P

Implementation: TypeAlias = Literal["auto", "kernel", "reference"]
IMPLEMENTATIONS: tuple[str, ...] = get_args(Implementation)
# jax.export's platform names, as a jax.Device names them.
DEVICE_PLATFORMS = {"cuda": "gpu", "rocm": "gpu"}

T = TypeVar("T")


# --- the implementation switch ----------------------------------------------------


def implement(
    implementation: str,
    env: str,
    platform: str,
    run_kernel: Callable[..., jax.Array],
    reference: Callable[..., jax.Array],
    *operands: jax.Array,
    interpret: object = None,
) -> jax.Array:
    """run_kernel(*operands, interpret=interpret) or reference(*operands), as
    `implementation` asks (resolve_implementation: the environment variable
    `env` wins). "auto": the kernel where the program is lowered for
    `platform` (as jax.export names it), native unless the caller asked for
    the interpreter, and the reference for any other platform, so that a
    program exported for the kernel's platform from any host holds the kernel."""
    choice = resolve_implementation(implementation, env)
    if choice == "reference":
        return reference(*operands)
    if choice == "kernel":
        return run_kernel(*operands, interpret=interpret)
    native = partial(run_kernel, interpret=False if interpret is None else interpret)
    return per_lowering_platform(platform, native, reference, *operands)


def resolve_implementation(implementation: str, env: str) -> Implementation:
    """The implementation a call asks for: the environment variable `env` wins,
    then the argument. ("auto" is chosen later, per lowering platform.)"""
    forced = os.environ.get(env, "")
    choice = forced or implementation
    if choice not in IMPLEMENTATIONS:
        source = f"${env}" if forced else "implementation"
        raise ValueError(f"{source} must be one of {IMPLEMENTATIONS}, got {choice!r}")
    return cast(Implementation, choice)  # one of IMPLEMENTATIONS, checked above


def per_lowering_platform(
    platform: str, native: Callable[..., T], other: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where the program is lowered for `platform` (as
    jax.export names it), other(*operands) for any other: chosen per lowering
    platform by lax.platform_dependent, so that a program exported for the
    platform from a host without it holds `native` (the host's
    jax.default_backend() would have chosen `other`).

    Called eagerly on arrays, by the devices they are on (placed_on):
    lax.platform_dependent evaluated eagerly asks the default device (JAX 0.10
    to 0.12), so on a TPU host it gave arrays on a CPU device the native
    kernel, which the CPU cannot run ("Only interpret mode is supported on CPU
    backend")."""
    placed = placed_on(*operands)
    if placed is not None:
        return (native if placed == DEVICE_PLATFORMS.get(platform, platform) else other)(*operands)
    result: T = jax.lax.platform_dependent(*operands, **{platform: native}, default=other)
    return result


def placed_on(*operands: jax.Array) -> str | None:
    """The platform (a jax.Device's: cpu, gpu, tpu) of the devices these arrays
    are on, where they are concrete (an eager call); None while they are
    traced (jit, vmap, grad), where the program's lowering platform decides.
    Under eager vmap or grad of arrays on a CPU device, lax.platform_dependent
    still asks the default device: there, trace under jax.default_device(the
    CPU device) or pass interpret=True."""
    if any(isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array) for x in operands):
        return None
    platforms = {device.platform for x in operands for device in x.devices()}
    return platforms.pop() if len(platforms) == 1 else None


# --- sharding ------------------------------------------------------------------------


def vary_alike(operands: list[jax.Array]) -> tuple[list[jax.Array], ManualAxisType]:
    """Inside jax.shard_map, pallas_call's result types must name the mesh axes
    they vary over (check_vma): those of the operands together, as each output
    tile depends on all of them. Operands that vary over fewer are cast up
    (pcast), whose transpose sums their cotangents over the added axes."""
    axes = frozenset().union(*(jax.typeof(x).manual_axis_type.varying for x in operands))
    operands = [
        jax.lax.pcast(x, tuple(sorted(axes - jax.typeof(x).manual_axis_type.varying)), to="varying")
        for x in operands
    ]
    return operands, jax.typeof(operands[0]).manual_axis_type


def explicitly_sharded(*arrays: jax.Array) -> bool:
    """Whether any operand's type shards it: only Explicit mesh axes appear in
    types (Auto ones are XLA's to choose, Manual ones are already split)."""
    return any(entry is not None for x in arrays for entry in jax.typeof(x).sharding.spec)


def mesh_axes(entry: object) -> tuple[str, ...]:
    """The mesh axes one partition-spec entry names: none, one, or a tuple."""
    if entry is None:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)


def per_shard(
    local: Callable[..., jax.Array], in_specs: Sequence[P], out_specs: P, *operands: jax.Array
) -> jax.Array:
    """local on each device's blocks of the operands, split as in_specs say,
    its results put together as out_specs says (pallas_call needs Manual mesh
    axes): jax.shard_map over the mesh axes the specs name, of the mesh in
    the operands' types.

    check_vma=False because Pallas's generic interpreter (JAX 0.12) cannot
    run with it on (it replays the kernel body on varying blocks, traced
    without their varying axes; only the TPU backend has another). The
    transpose then sums each operand's cotangent over the named axes its spec
    leaves out: the sums the gradient needs, and no others, since only the
    named mesh axes enter the shard_map (cell jit-explicit-2d-* compares the
    gradient's collectives with the reference's)."""
    named = {axis for spec in (*in_specs, out_specs) for entry in spec for axis in mesh_axes(entry)}

    def run(*operands: jax.Array) -> jax.Array:
        # The mesh comes from the operands' types (with the unused axes Auto,
        # below): under jit outside jax.set_mesh there is no context mesh.
        mesh = next(m for m in (jax.typeof(x).sharding.mesh for x in operands) if m.axis_names)
        return jax.shard_map(
            local,
            mesh=mesh,
            in_specs=tuple(in_specs),
            out_specs=out_specs,
            axis_names=named,
            check_vma=False,
        )(*operands)

    mesh = next(m for m in (jax.typeof(x).sharding.mesh for x in operands) if m.axis_names)
    # Inside a jax.shard_map manual over some mesh axes, those are already
    # split and stay Manual: JAX refuses to make them Auto ("Going from
    # `Manual` AxisType to `Auto`"), so only the others are made Auto.
    manual = set(mesh.manual_axes)
    if manual and named:
        # Operands split over the Explicit axes such a shard_map leaves free:
        # the kernel's blocks keep the manual axes' varying types, which
        # Pallas's interpreter (its while_loop carry) and the custom VJP's
        # cotangents lose (JAX 0.12). Refused plainly instead.
        raise NotImplementedError(
            f"operands split over the Explicit mesh axes {sorted(named)} inside a jax.shard_map "
            f"manual over {sorted(manual)}: not supported; make the shard_map manual over "
            "them too (axis_names), or reshard the operands whole over them first"
        )
    unused = tuple(sorted(set(mesh.axis_names) - named - manual))
    if not unused:
        return run(*operands)
    # Mesh axes no operand is sharded over (on a 2-D mesh, say, only the rows
    # split): Auto for the kernel's duration. Left Explicit, they stay in the
    # types inside the shard_map, and Pallas's interpreter (JAX 0.12) fails on
    # its block writes.
    out = NamedSharding(mesh, out_specs)
    result: jax.Array = jax.sharding.auto_axes(run, axes=unused, out_sharding=out)(*operands)
    return result


def batches_per_shard(call: Callable[..., T]) -> Callable[..., T]:
    """call, whose vmap runs per shard where the batch axis is split over
    Explicit mesh axes (jit(vmap(op)) on a batch placed over a mesh).

    pallas_call's own batching rule would shard_map over those axes, but it
    takes the mesh from the context (jax.set_mesh; outside it, a KeyError),
    and its shard_map has check_vma=True, which Pallas's generic interpreter
    cannot run. Here: jax.shard_map over the batch's mesh axes, check_vma=False
    as in per_shard, of call vmapped on each device's slice of the batch
    (pallas_call's batching rule folds that into the kernel's grid). Any other
    batch: vmap as usual."""
    batched = jax.custom_batching.custom_vmap(call)

    @batched.def_vmap
    def rule(_: int, in_batched: list[bool], *operands: jax.Array) -> tuple[T, Any]:
        local = jax.vmap(call, in_axes=[0 if x else None for x in in_batched])
        # Each batched operand's type: its leading axis is the batch.
        types = [jax.typeof(x) for x, b in zip(operands, in_batched, strict=True) if b]
        split = [t.sharding for t in types if t.sharding.spec and t.sharding.spec[0] is not None]
        if split:
            axes = mesh_axes(split[0].spec[0])
            local = jax.shard_map(
                local,
                mesh=split[0].mesh,
                in_specs=tuple(P(axes) if b else P() for b in in_batched),
                out_specs=P(axes),
                axis_names=set(axes),
                check_vma=False,
            )
        out = local(*operands)
        return out, jax.tree.map(lambda _: True, out)

    return batched


# --- derivatives ---------------------------------------------------------------------


def kernel_call(call: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
    """call (Pallas kernels, batched per shard as batches_per_shard says),
    differentiated as its twin: the same maths in plain JAX.

    First order differentiates the op's custom VJP, never a kernel. Second
    order (jax.hessian, grad of grad) differentiates that VJP's forward and
    backward, and so each kernel call in them, which JAX cannot: pallas_call
    has no derivative it can transpose. Here each call keeps the kernel's
    values and takes its twin's tangent, which XLA computes and JAX can
    transpose: the op's higher derivatives are its twins' maths, run by XLA,
    at any order (the twin's tangent differentiates as plain JAX). Worth the
    twins rather than refusing second order: a Hessian-vector product or a
    gradient penalty then works on the op as it is, its values still the
    kernel's."""
    wrapped = jax.custom_jvp(batches_per_shard(call))

    @wrapped.defjvp
    def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        _, tangent = jax.jvp(twin, primals, tangents)
        return wrapped(*primals), tangent

    return wrapped
