"""RMS normalisation over the last axis, computed by C++ XLA FFI handlers.

    y = x / sqrt(mean(x**2, axis=-1) + eps)

The handlers live in csrc/ and reach Python as PyCapsules from the extension
module `_ffi`. Importing this module registers them with XLA under the names
in TARGETS; jax.ffi.ffi_call then emits a custom call to them, and
jax.custom_vjp pairs the forward handler with the backward one so that grad
works (an ffi_call has no autodiff rule of its own).

No learned gain: multiply by it in JAX (`weight * rms_norm(x)`), where XLA
fuses the product with whatever follows. See README.md to move it into the
handler.
"""

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh
from jax.typing import ArrayLike, DTypeLike

try:
    from . import _ffi
except ImportError as err:  # e.g. src/ on sys.path without a build
    raise ImportError(
        f"{__package__}._ffi, the compiled extension, is missing: build it with "
        "`python -m pip install -e .` (see README.md)"
    ) from err

# Target names are process-wide: prefix them with the package name so that two
# projects generated from this template can be imported together.
_PREFIX = __name__.split(".")[0]
FORWARD = f"{_PREFIX}_rms_norm_fwd"
BACKWARD = f"{_PREFIX}_rms_norm_bwd"
TARGETS = (FORWARD, BACKWARD)


def _register() -> None:
    # The CUDA handlers register even without a GPU; XLA only looks them up
    # when it compiles for one.
    for platform, capsules in (("cpu", _ffi.cpu_targets()), ("CUDA", _ffi.cuda_targets())):
        for name, capsule in capsules.items():
            jax.ffi.register_ffi_target(f"{_PREFIX}_{name}", capsule, platform=platform)


_register()


def cuda_available() -> bool:
    """Whether this build of the extension contains the CUDA handler."""
    return bool(_ffi.cuda_targets())


def rms_norm(x: ArrayLike, eps: float = 1e-6) -> jax.Array:
    """x / sqrt(mean(x**2) + eps) over the last axis of x, by the FFI handler.

    x: float32, float64 or bfloat16, rank >= 1, rows of length >= 1; every
    leading axis is a batch of rows. eps: a Python number (it becomes an
    attribute of the compiled call, so it cannot be traced). Differentiable
    (reverse mode), works under jit and vmap. An x whose leading axes are
    sharded over an explicit-axes mesh (jax.make_mesh's default) is
    normalised shard by shard, with no communication, gradient included; a
    sharded last axis is gathered first (each row must be whole on one device).

    The handler checks its arguments and raises jax.errors.JaxRuntimeError
    naming the problem; under jit that happens when the program runs.
    """
    x = jnp.asarray(x)
    try:
        eps = float(eps)
    except (TypeError, jax.errors.ConcretizationTypeError) as err:
        raise TypeError(
            f"rms_norm: eps must be a Python number, got {type(eps).__name__}; it is a "
            "compile-time attribute of the FFI call and cannot be a traced value"
        ) from err
    if x.ndim and x.shape[-1] == 0:
        # The handler refuses this too, but XLA skips a call whose used results
        # are all empty, so under jit only this check is sure to run.
        raise ValueError(
            f"rms_norm: x has rows of length 0 (shape {x.shape}); the mean over an empty "
            "last axis is undefined"
        )
    rows = _row_sharding(x)
    if rows is None:
        return _rms_norm(x, eps)
    mesh, spec = rows
    if tuple(jax.typeof(x).sharding.spec) != tuple(spec):
        # Each row must be whole on one device: gather a sharded last axis.
        whole_rows: jax.Array = jax.sharding.reshard(x, jax.NamedSharding(mesh, spec))
        x = whole_rows
    if all(axis is None for axis in spec):
        return _rms_norm(x, eps)
    # Inside, each block varies over the mesh axes that spec names, and the
    # FFI results are declared with that type (see _result_type). Keep
    # shard_map's check of it (check_vma) on: turned off, the transpose sums
    # every cotangent over the mesh axes the spec leaves unnamed, an
    # all-reduce that the plain-JAX gradient does not have.
    local: Callable[[jax.Array], jax.Array] = jax.shard_map(
        lambda block: _rms_norm(block, eps), mesh=mesh, in_specs=spec, out_specs=spec
    )
    return local(x)


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


def _residual_dtype(dtype: DTypeLike) -> DTypeLike:
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


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _forward(x: jax.Array, eps: float) -> tuple[jax.Array, jax.Array]:
    """(y, rinv): the output and 1/rms per row, which the backward reuses."""
    y_type = _result_type(x, x.shape, x.dtype)
    rinv_type = _result_type(x, x.shape[:-1], _residual_dtype(x.dtype))
    # vmap_method="broadcast_all": under vmap the handler receives every
    # operand with the batch axis in front, which to a row-wise op is just
    # more rows: one call for the whole batch. Attributes are typed: the
    # handler binds Attr<double>("eps"), so eps must arrive as float64.
    call = jax.ffi.ffi_call(FORWARD, (y_type, rinv_type), vmap_method="broadcast_all")
    y, rinv = call(x, eps=np.float64(eps))
    return y, rinv


@jax.custom_jvp
def _backward(x: jax.Array, rinv: jax.Array, cotangent: jax.Array) -> jax.Array:
    dx = _result_type(x, x.shape, x.dtype)
    call = jax.ffi.ffi_call(BACKWARD, dx, vmap_method="broadcast_all")
    return call(x, rinv, cotangent)


# An ffi_call has no derivative, and grad of grad (Hessian-vector products)
# differentiates both handler calls: the custom_vjp below runs _forward
# for its residuals and _backward for the gradient. Their derivatives are
# plain JAX, which XLA fuses and JAX can transpose; first-order gradients
# never evaluate them and stay entirely in the handlers.
def _backward_formula(x: jax.Array, rinv: jax.Array, cotangent: jax.Array) -> jax.Array:
    """What the backward handler computes: r * g - r**3 * mean(g * x) * x per row."""
    r = rinv[..., None]
    xc, gc = x.astype(r.dtype), cotangent.astype(r.dtype)
    return (r * gc - r**3 * jnp.mean(gc * xc, axis=-1, keepdims=True) * xc).astype(x.dtype)


@_forward.defjvp
def _forward_jvp(
    eps: float, primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    (x,), (t,) = primals, tangents
    y, rinv = _forward(x, eps)
    # d(1/rms) = -(1/rms)**3 * mean(x * t); the y tangent is the backward
    # formula with t as the cotangent (the Jacobian of y is symmetric).
    r = rinv[..., None]
    rinv_t = -(r**3) * jnp.mean(x.astype(r.dtype) * t.astype(r.dtype), axis=-1, keepdims=True)
    return (y, rinv), (_backward_formula(x, rinv, t), rinv_t[..., 0])


@_backward.defjvp
def _backward_jvp(
    primals: tuple[jax.Array, jax.Array, jax.Array],
    tangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array]:
    _, dx_t = jax.jvp(_backward_formula, primals, tangents)
    return _backward(*primals), dx_t


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _rms_norm(x: jax.Array, eps: float) -> jax.Array:
    return _forward(x, eps)[0]


# The residuals: x and 1/rms per row.
type Residuals = tuple[jax.Array, jax.Array]


def _rms_norm_fwd(x: jax.Array, eps: float) -> tuple[jax.Array, Residuals]:
    y, rinv = _forward(x, eps)
    return y, (x, rinv)


def _rms_norm_bwd(eps: float, residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array]:
    del eps  # already folded into rinv
    x, rinv = residuals
    return (_backward(x, rinv, cotangent),)


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)
