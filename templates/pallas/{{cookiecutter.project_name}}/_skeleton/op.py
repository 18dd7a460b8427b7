"""The op: the identity y = x * 1 as a Pallas kernel (kernel.py), differentiable
through a custom VJP. Second order differentiates the custom VJP's forward
and backward: there each kernel call has a plain-JAX twin, whose derivative
JAX takes instead (_kernel_call).

TODO: make this your op: the public function's arguments and input checks
(check_operands), the kernel call, the custom VJP's forward and backward, the
per-shard specs, and SHARDING_RULE and WHOLE_AXES (from which partitioning.py
builds the custom_partitioning rule for jit with Auto shardings).

Around the kernel, as in the worked example: implementation="auto" |
"kernel" | "reference" (IMPLEMENTATION_ENV overrides it), chosen per lowering
platform; under Explicit mesh axes the kernel runs per shard through
jax.shard_map, and so does each slice of a vmapped batch split over them.
"""

import os
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar, cast, get_args

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import kernel
from .reference import {{ cookiecutter.op_name }}_reference

DTYPES = (jnp.float32, jnp.bfloat16)
# TODO: your op's sharding, einsum-like (each operand's axes -> the output's),
# and the axes the kernel needs whole on each device. The identity is
# elementwise: any axis shards with no communication.
SHARDING_RULE = "m n -> m n"
WHOLE_AXES: tuple[str, ...] = ()
BACKWARD = "{{ cookiecutter.backward }}"  # "kernel": Pallas backward; "reference": XLA's

Implementation: TypeAlias = Literal["auto", "kernel", "reference"]
IMPLEMENTATIONS: tuple[str, ...] = get_args(Implementation)
# Set to kernel or reference to force that implementation on every call.
# Read when the op is traced: set it before the first jit call.
IMPLEMENTATION_ENV = "{{ cookiecutter.package_name.upper() }}_IMPLEMENTATION"


def {{ cookiecutter.op_name }}(
    x: ArrayLike,
    *,
    implementation: Implementation = "auto",
    block_m: int | None = None,
    interpret: kernel.Interpret = None,
) -> jax.Array:
    """TODO: your op. Here: x (m, n) * 1, in the dtype of x.

    implementation: kernel runs the Pallas kernel (interpreted where its
    hardware is absent), reference the plain-JAX reference, auto the kernel
    where the program is lowered for the kernel's platform and the reference
    elsewhere. block_m: rows per block (default kernel.DEFAULT_BLOCK_M).
    """
    x = jnp.asarray(x)
    check_operands(x)
    choice = resolve_implementation(implementation)
    if choice == "reference":
        return {{ cookiecutter.op_name }}_reference(x)
    run = partial(kernel_only, block_m=block_m, interpret=interpret)
    if choice == "kernel":
        return run(x)
    native = partial(run, interpret=False if interpret is None else interpret)
    branches = {kernel.PLATFORM: native}
    reference = {{ cookiecutter.op_name }}_reference
    placed = placed_on_kernels_platform(x)
    if placed is not None:  # eagerly: by the devices the arrays are on
        return (native if placed else reference)(x)
    result: jax.Array = jax.lax.platform_dependent(x, **branches, default=reference)
    return result


def placed_on_kernels_platform(*arrays: jax.Array) -> bool | None:
    """Whether concrete arrays (an eager call) are on devices of the kernel's
    platform; None while they are traced (jit, vmap, grad), where the
    program's lowering platform decides (lax.platform_dependent). Eagerly,
    lax.platform_dependent asks the default device (JAX 0.10 to 0.12): on a
    TPU host, arrays on a CPU device got the native kernel, which the CPU
    cannot run ("Only interpret mode is supported on CPU backend")."""
    if any(isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array) for x in arrays):
        return None
    platforms = {device.platform for x in arrays for device in x.devices()}
    # jax.export names a GPU's platform cuda, a jax.Device gpu.
    return platforms == {_DEVICE_PLATFORMS.get(kernel.PLATFORM, kernel.PLATFORM)}


_DEVICE_PLATFORMS = {"cuda": "gpu", "rocm": "gpu"}


def kernel_only(
    x: jax.Array, *, block_m: int | None = None, interpret: kernel.Interpret = None
) -> jax.Array:
    """The kernel, whatever IMPLEMENTATION_ENV says, on a checked operand."""
    again = partial(kernel_only, block_m=block_m)
    if any(entry is not None for entry in jax.typeof(x).sharding.spec):
        # pallas_call needs Manual mesh axes: run it per shard, on local shapes.
        return _per_shard(partial(again, interpret=interpret), x)
    if interpret is None:
        return kernel.native_or_interpreted(
            partial(again, interpret=False), partial(again, interpret=True), x
        )
    bm: object = kernel.DEFAULT_BLOCK_M if block_m is None else block_m
    if not isinstance(bm, int) or bm < 1:
        raise ValueError(f"block_m must be a positive int, got {bm!r}")
    (x,), _ = kernel.vary_alike([x])
    return _differentiable(x, bm, interpret)


def check_operands(x: jax.Array) -> None:
    """TODO: your op's shapes and dtypes."""
    if x.ndim != 2:
        raise ValueError(f"expected x (m, n), got shape {x.shape}")
    if x.dtype not in DTYPES:
        raise TypeError(f"x must be float32 or bfloat16, got {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"empty operand: x {x.shape}")


def resolve_implementation(implementation: str) -> Implementation:
    """The implementation a call asks for: the environment variable wins."""
    forced = os.environ.get(IMPLEMENTATION_ENV, "")
    choice = forced or implementation
    if choice not in IMPLEMENTATIONS:
        source = f"${IMPLEMENTATION_ENV}" if forced else "implementation"
        raise ValueError(f"{source} must be one of {IMPLEMENTATIONS}, got {choice!r}")
    return cast(Implementation, choice)  # one of IMPLEMENTATIONS, checked above


# --- the custom VJP -----------------------------------------------------------------


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _differentiable(x: jax.Array, bm: int, interpret: kernel.Interpret) -> jax.Array:
    return _scale(x, 1.0, bm, interpret)


def _scale(x: jax.Array, factor: float, bm: int, interpret: kernel.Interpret) -> jax.Array:
    """The kernel call (TODO: yours, and its twin: the same maths in plain
    JAX), batched per shard (_batches_per_shard)."""
    call = partial(kernel.scale, factor=factor, block_m=bm, interpret=interpret)
    y: jax.Array = _kernel_call(call, lambda x: x * factor)(x)
    return y


def _kernel_call(call: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
    """call (Pallas kernels, batched per shard), differentiated as its twin.

    First order differentiates the custom VJP above, never a kernel. Second
    order (jax.hessian, grad of grad) differentiates that VJP's forward and
    backward, and so each kernel call in them, which JAX cannot: pallas_call
    has no derivative it can transpose. Here each call keeps the kernel's
    values and takes its twin's tangent, which XLA computes and JAX can
    transpose: the op's higher derivatives are its twins', at any order."""
    kernel_call = jax.custom_jvp(_batches_per_shard(call))

    @kernel_call.defjvp
    def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        _, tangent = jax.jvp(twin, primals, tangents)
        return kernel_call(*primals), tangent

    return kernel_call


{% if cookiecutter.backward == "kernel" -%}
def _fwd(x: jax.Array, bm: int, interpret: kernel.Interpret) -> tuple[jax.Array, None]:
    return _scale(x, 1.0, bm, interpret), None


def _bwd(bm: int, interpret: kernel.Interpret, _: None, g: jax.Array) -> tuple[jax.Array]:
    # TODO: your op's backward. The identity's: dx = g * 1, the same kernel.
    return (_scale(g, 1.0, bm, interpret),)
{%- else -%}
def _fwd(x: jax.Array, bm: int, interpret: kernel.Interpret) -> tuple[jax.Array, jax.Array]:
    return _scale(x, 1.0, bm, interpret), x


def _bwd(bm: int, interpret: kernel.Interpret, x: jax.Array, g: jax.Array) -> tuple[jax.Array]:
    # The reference's VJP, by XLA.
    _, reference_vjp = jax.vjp({{ cookiecutter.op_name }}_reference, x)
    grads: tuple[jax.Array] = reference_vjp(g)
    return grads
{%- endif %}


_differentiable.defvjp(_fwd, _bwd)


# --- sharding: one kernel per shard --------------------------------------------------


def _per_shard(local: Callable[..., jax.Array], x: jax.Array) -> jax.Array:
    """Run local on each device's block of x; refuse a split axis that
    WHOLE_AXES says the kernel needs whole (a row it reduces over, say). TODO:
    your op's specs, if it has other operands."""
    rows, cols = (tuple(jax.typeof(x).sharding.spec) + (None, None))[:2]
    # x's axes, as SHARDING_RULE names them ("m n, ... -> ...": the first operand's).
    axes = SHARDING_RULE.split("->")[0].split(",")[0].split()
    split = [a for a, entry in zip(axes, (rows, cols), strict=True) if entry and a in WHOLE_AXES]
    if split:
        raise ValueError(
            f"axis {split[0]} of x is sharded ({P(rows, cols)}): the kernel needs it whole "
            "on each device (WHOLE_AXES); jax.sharding.reshard x first"
        )
    named = {a for entry in (rows, cols) for a in _mesh_axes(entry)}

    # check_vma=False: Pallas's generic interpreter (JAX 0.12) replays the
    # kernel body on varying blocks, traced without their varying axes, and fails.
    def per_shard(x: jax.Array) -> jax.Array:
        return jax.shard_map(
            local,
            mesh=jax.typeof(x).sharding.mesh,
            in_specs=P(rows, cols),
            out_specs=P(rows, cols),
            axis_names=named,
            check_vma=False,
        )(x)

    mesh = jax.typeof(x).sharding.mesh
    unused = tuple(sorted(set(mesh.axis_names) - named))
    if not unused:
        return per_shard(x)
    # Mesh axes x is not sharded over: Auto for the kernel's duration (left
    # Explicit, Pallas's interpreter fails on its block writes).
    out = NamedSharding(mesh, P(rows, cols))
    result: jax.Array = jax.sharding.auto_axes(per_shard, axes=unused, out_sharding=out)(x)
    return result


def _mesh_axes(entry: object) -> tuple[str, ...]:
    """The mesh axes one partition-spec entry names: none, one, or a tuple."""
    if entry is None:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)


T = TypeVar("T")


def _batches_per_shard(call: Callable[..., T]) -> Callable[..., T]:
    """call, whose vmap runs per shard where the batch axis is split over
    Explicit mesh axes: jax.shard_map over them (check_vma=False, as in
    _per_shard) of call vmapped on each device's slice. pallas_call's own
    batching rule reads the mesh from the context (jax.set_mesh) and runs a
    check_vma=True shard_map, which Pallas's generic interpreter cannot."""
    batched = jax.custom_batching.custom_vmap(call)

    @batched.def_vmap
    def rule(_: int, in_batched: list[bool], *operands: jax.Array) -> tuple[T, Any]:
        local = jax.vmap(call, in_axes=[0 if x else None for x in in_batched])
        types = [jax.typeof(x) for x, b in zip(operands, in_batched, strict=True) if b]
        split = [t.sharding for t in types if t.sharding.spec and t.sharding.spec[0] is not None]
        if split:
            axes = _mesh_axes(split[0].spec[0])
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
