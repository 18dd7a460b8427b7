"""Row-wise softmax as a Pallas TPU kernel, differentiable through a custom VJP.

Each grid step copies a (block_m, n) tile of rows into VMEM, whole along the
row, and writes their softmax: the row's max, exp and sum never leave VMEM.
The backward is a second kernel on the saved output y:
dx = y * (g - sum(g * y)), row by row.

Around the kernels, as in the starter: implementation="auto" | "kernel" |
"reference" (IMPLEMENTATION_ENV overrides it), chosen per lowering platform;
under Explicit mesh axes the kernel runs per row shard through jax.shard_map;
partitioning.py builds the custom_partitioning rule from SHARDING_RULE and
WHOLE_AXES below.
"""

import functools
import os
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar, cast, get_args

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import kernel
from .reference import softmax_reference

DTYPES = (jnp.float32, jnp.bfloat16)
# Rows shard with no communication; each row must be whole on one device.
SHARDING_RULE = "m n -> m n"
WHOLE_AXES = ("n",)
BACKWARD = "kernel"
DEFAULT_BLOCK_M = 128

Implementation: TypeAlias = Literal["auto", "kernel", "reference"]
IMPLEMENTATIONS: tuple[str, ...] = get_args(Implementation)
IMPLEMENTATION_ENV = "ADAPTED_SOFTMAX_IMPLEMENTATION"


def softmax(
    x: ArrayLike,
    *,
    implementation: Implementation = "auto",
    block_m: int | None = None,
    interpret: kernel.Interpret = None,
) -> jax.Array:
    """Softmax over the last axis of x (m, n), in the dtype of x."""
    x = jnp.asarray(x)
    check_operands(x)
    choice = resolve_implementation(implementation)
    if choice == "reference":
        return softmax_reference(x)
    run = partial(kernel_only, block_m=block_m, interpret=interpret)
    if choice == "kernel":
        return run(x)
    native = partial(run, interpret=False if interpret is None else interpret)
    branches = {kernel.PLATFORM: native}
    placed = placed_on_kernels_platform(x)
    if placed is not None:  # eagerly: by the devices the arrays are on
        return (native if placed else softmax_reference)(x)
    result: jax.Array = jax.lax.platform_dependent(x, **branches, default=softmax_reference)
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
        return _per_shard(partial(again, interpret=interpret), x)
    if interpret is None:
        return kernel.native_or_interpreted(
            partial(again, interpret=False), partial(again, interpret=True), x
        )
    bm: object = DEFAULT_BLOCK_M if block_m is None else block_m
    if not isinstance(bm, int) or bm < 1:
        raise ValueError(f"block_m must be a positive int, got {bm!r}")
    # A symbolic m (jax.export) cannot be compared with a block: keep it.
    m: object = x.shape[0]
    bm = min(bm, m) if isinstance(m, int) else bm
    kernel.check_block("x", (bm, x.shape[1]), x.shape)
    return _differentiable(x, bm, interpret)


def check_operands(x: jax.Array) -> None:
    if x.ndim != 2:
        raise ValueError(f"expected x (m, n), got shape {x.shape}")
    if x.dtype not in DTYPES:
        raise TypeError(f"x must be float32 or bfloat16, got {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"empty operand: x {x.shape}")


def resolve_implementation(implementation: str) -> Implementation:
    forced = os.environ.get(IMPLEMENTATION_ENV, "")
    choice = forced or implementation
    if choice not in IMPLEMENTATIONS:
        source = f"${IMPLEMENTATION_ENV}" if forced else "implementation"
        raise ValueError(f"{source} must be one of {IMPLEMENTATIONS}, got {choice!r}")
    return cast(Implementation, choice)


# --- the kernels ---------------------------------------------------------------------


def _rows(
    body: Callable[..., None], operands: list[jax.Array], bm: int, interpret: kernel.Interpret
) -> jax.Array:
    """body over (bm, n) row tiles of the operands, one output of their shape."""
    (m, n), dtype = operands[0].shape, operands[0].dtype
    operands, varying = kernel.vary_alike(operands)
    interpreter = kernel.interpreter_for(varying)
    if interpret is True:
        interpret = interpreter
    # jnp.int32(0), not 0: under jax_enable_x64 a Python int lowers as int64,
    # which Mosaic refuses in an index map ("failed to legalize operation
    # 'func.return'"); the grid index is int32.
    spec = pl.BlockSpec((bm, n), lambda i: (i, jnp.int32(0)))
    call = functools.partial(
        pl.pallas_call,
        body,
        grid=(pl.cdiv(m, bm),),
        in_specs=[spec] * len(operands),
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((m, n), dtype, manual_axis_type=varying),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )
    if interpret is None:
        out: jax.Array = kernel.native_or_interpreted(
            lambda *x: call(interpret=False)(*x),
            lambda *x: call(interpret=interpreter)(*x),
            *operands,
        )
        return out
    result: jax.Array = call(interpret=interpret)(*operands)
    return result


def _forward_kernel(x_ref: jax.Ref, y_ref: jax.Ref) -> None:
    # Rows past the edge of m are computed but never written back.
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    y_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(y_ref.dtype)


def _backward_kernel(y_ref: jax.Ref, g_ref: jax.Ref, dx_ref: jax.Ref) -> None:
    y, g = y_ref[...].astype(jnp.float32), g_ref[...].astype(jnp.float32)
    dx = y * (g - jnp.sum(g * y, axis=-1, keepdims=True))
    dx_ref[...] = dx.astype(dx_ref.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _differentiable(x: jax.Array, bm: int, interpret: kernel.Interpret) -> jax.Array:
    return _forward(x, bm, interpret)


def _forward(x: jax.Array, bm: int, interpret: kernel.Interpret) -> jax.Array:
    rows = partial(_rows, _forward_kernel, bm=bm, interpret=interpret)
    y: jax.Array = _batches_per_shard(lambda x: rows([x]))(x)
    return y


def _fwd(x: jax.Array, bm: int, interpret: kernel.Interpret) -> tuple[jax.Array, jax.Array]:
    y = _forward(x, bm, interpret)
    return y, y


def _bwd(bm: int, interpret: kernel.Interpret, y: jax.Array, g: jax.Array) -> tuple[jax.Array]:
    backward = partial(_rows, _backward_kernel, bm=bm, interpret=interpret)
    dx: jax.Array = _batches_per_shard(lambda y, g: backward([y, g]))(y, g.astype(y.dtype))
    return (dx,)


_differentiable.defvjp(_fwd, _bwd)


# --- sharding: one kernel per row shard ----------------------------------------------


def _per_shard(local: Callable[..., jax.Array], x: jax.Array) -> jax.Array:
    rows, cols = (tuple(jax.typeof(x).sharding.spec) + (None, None))[:2]
    if cols is not None:
        raise ValueError(
            f"the row axis n is sharded ({P(rows, cols)}): the kernel needs each row whole "
            "on one device; jax.sharding.reshard it first"
        )
    mesh = jax.typeof(x).sharding.mesh
    named = set(rows if isinstance(rows, tuple) else (rows,))

    def per_shard(x: jax.Array) -> jax.Array:
        # The mesh from x's type, with the unused axes Auto (below).
        return jax.shard_map(
            local,
            mesh=jax.typeof(x).sharding.mesh,
            in_specs=P(rows, None),
            out_specs=P(rows, None),
            axis_names=named,
            check_vma=False,
        )(x)

    unused = tuple(sorted(set(mesh.axis_names) - named))
    if not unused:
        return per_shard(x)
    # Mesh axes x is not sharded over: Auto for the kernel's duration (left
    # Explicit, Pallas's interpreter fails on its block writes).
    out = NamedSharding(mesh, P(rows, None))
    result: jax.Array = jax.sharding.auto_axes(per_shard, axes=unused, out_sharding=out)(x)
    return result


T = TypeVar("T")


def _batches_per_shard(call: Callable[..., T]) -> Callable[..., T]:
    """call, whose vmap runs per shard where the batch axis is split over
    Explicit mesh axes: jax.shard_map over them (check_vma=False, as in
    _per_shard) of call vmapped on each device's slice. pallas_call's own
    batching rule reads the mesh from the context (jax.set_mesh)."""
    batched = jax.custom_batching.custom_vmap(call)

    @batched.def_vmap
    def rule(_: int, in_batched: list[bool], *operands: jax.Array) -> tuple[T, Any]:
        local = jax.vmap(call, in_axes=[0 if x else None for x in in_batched])
        types = [jax.typeof(x) for x, b in zip(operands, in_batched, strict=True) if b]
        split = [t.sharding for t in types if t.sharding.spec and t.sharding.spec[0] is not None]
        if split:
            entry = split[0].spec[0]
            axes = entry if isinstance(entry, tuple) else (entry,)
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
