"""The machinery between the op's Python (`{{ cookiecutter.op_name }}.py`) and its C++ handlers:
registration of the FFI targets, the two FFI calls, the check that rows are
not empty, and the sharding wrapper that hands each device whole rows.

The handlers (csrc/) compute a row-wise op over the last axis of x: the
forward call returns y (x's shape and dtype) and one residual per row, the
backward call returns dx from x, the residual and the cotangent of y. The
rows themselves are csrc/{{ cookiecutter.op_name }}_kernels.h.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh, Mesh
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
# The name of the handlers' one attribute (kAttribute in the kernel file).
ATTRIBUTE: str = _ffi.attribute


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


def apply(local: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    """local(x), with x's rows whole on each device: local is the op on an
    unsharded block of rows (the custom_vjp around the FFI calls).

    An x whose leading axes are sharded over an explicit-axes mesh
    (jax.make_mesh's default) runs shard by shard, with no communication,
    gradient included; a sharded last axis is gathered first, and the result
    sharded like x again.
    """
    if x.ndim and x.shape[-1] == 0:
        # The handler refuses this too, but XLA skips a call whose used results
        # are all empty, so under jit only this check is sure to run.
        raise ValueError(
            f"{OP}: x has rows of length 0 (shape {x.shape}); the op needs at least one "
            "element per row"
        )
    rows = _row_sharding(x)
    if rows is None:
        return local(x)
    mesh, spec = rows
    given = jax.typeof(x).sharding
    if tuple(given.spec) != tuple(spec):
        # Each row must be whole on one device: gather a sharded last axis,
        # and give the result x's own sharding back (as the plain-JAX op's
        # result has it): the gather is the handler's need, not the caller's.
        whole_rows: jax.Array = jax.sharding.reshard(x, jax.NamedSharding(mesh, spec))
        result = apply(local, whole_rows)
        if result.shape != x.shape:
            return result
        restored: jax.Array = jax.sharding.reshard(result, given)
        return restored
    if all(axis is None for axis in spec):
        return local(x)
    # Inside, each block varies over the mesh axes that spec names, and the
    # FFI results are declared with that type (see _result_type). Keep
    # shard_map's check of it (check_vma) on: turned off, the transpose sums
    # every cotangent over the mesh axes the spec leaves unnamed, an
    # all-reduce that the plain-JAX gradient does not have.
    sharded: Callable[[jax.Array], jax.Array] = jax.shard_map(
        lambda block: local(block), mesh=mesh, in_specs=spec, out_specs=spec
    )
    return sharded(x)


def _row_sharding(x: jax.Array) -> tuple[Mesh | AbstractMesh, jax.P] | None:
    """(mesh, spec): x's sharding with every row whole on one device (the last
    axis unsharded), when x is sharded and JAX knows it while tracing
    (explicit-axes meshes); else None.

    XLA cannot partition a custom call it knows nothing about: given a sharded
    operand it gathers it whole onto every device first. Running the call
    inside shard_map hands each device its own rows instead. (An ffi_call can
    also be made batch-partitionable, but under Shardy, JAX's default
    partitioner, that needs an sdy.sharding_rule attribute that ffi_call
    cannot attach; see README.md.)
    """
    sharding = jax.typeof(x).sharding
    if x.ndim < 1 or sharding.mesh.empty:
        return None
    spec = tuple(sharding.spec) + (None,) * (x.ndim - len(sharding.spec))
    if all(axis is None for axis in spec):
        return None
    return sharding.mesh, jax.P(*spec[:-1], None)


def residual_dtype(dtype: DTypeLike) -> DTypeLike:
    """The residual's dtype: float64 for float64 x, else float32."""
    return jnp.float64 if dtype == jnp.float64 else jnp.float32


def _result_type(x: jax.Array, shape: tuple[int, ...], dtype: DTypeLike) -> jax.ShapeDtypeStruct:
    """The type of an FFI result laid out in x's rows: shape and dtype as
    given, x's mesh and row sharding, and x's varying manual axes.

    ffi_call gives its results exactly the types declared, and a bare
    ShapeDtypeStruct(shape, dtype) inside shard_map declares a value that is
    the same on every device. x's row block is not, so take the type from
    jax.typeof(x): then the results vary over the same mesh axes as x.
    """
    x_type = jax.typeof(x)
    mesh = x_type.sharding.mesh
    if mesh.empty:
        return jax.ShapeDtypeStruct(shape, dtype)
    rows = jax.P(*x_type.sharding.spec[: x.ndim - 1])  # every row whole
    return jax.ShapeDtypeStruct(
        shape,
        dtype,
        sharding=jax.NamedSharding(mesh, rows),
        manual_axis_type=x_type.manual_axis_type,
    )


def forward(x: jax.Array, **attribute: Any) -> tuple[jax.Array, jax.Array]:
    """(y, residual) from the forward handler. `attribute`: the one attribute,
    by its name, as np.float64 (the handler binds Attr<double>)."""
    y_type = _result_type(x, x.shape, x.dtype)
    residual_type = _result_type(x, x.shape[:-1], residual_dtype(x.dtype))
    # vmap_method="broadcast_all": under vmap the handler receives every
    # operand with the batch axis in front, which to a row-wise op is just
    # more rows: one call for the whole batch.
    call = jax.ffi.ffi_call(FORWARD, (y_type, residual_type), vmap_method="broadcast_all")
    y, residual = call(x, **attribute)
    return y, residual


def backward(x: jax.Array, residual: jax.Array, cotangent: jax.Array) -> jax.Array:
    """dx from the backward handler."""
    dx = _result_type(x, x.shape, x.dtype)
    call = jax.ffi.ffi_call(BACKWARD, dx, vmap_method="broadcast_all")
    result: jax.Array = call(x, residual, cotangent)
    return result
