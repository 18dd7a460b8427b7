"""A new JAX primitive: the periodic (cyclic) tridiagonal matrix-vector product.

    y[..., i] = dl[..., i] * x[..., i-1] + d[..., i] * x[..., i] + du[..., i] * x[..., i+1]

with indices modulo n: the bands wrap around, so dl[..., 0] multiplies
x[..., n-1] and du[..., n-1] multiplies x[..., 0]. All four operands have the
same shape (*batch, n).

The product is linear in x and, separately, in the three bands: the JVP is
the sum of two products, the transpose with respect to x is the product with
the transposed matrix (the primitive again), and batching moves the batch
axis to the front and makes one call.
"""

# JAX's extension points carry no type annotations.
# mypy: disallow-untyped-calls=False, warn-return-any=False

from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

periodic_matvec_p = Primitive("periodic_matvec")
# The name each of the primitive's error messages starts with.
_NAME = periodic_matvec_p.name


def periodic_matvec(
    dl: jax.Array,
    d: jax.Array,
    du: jax.Array,
    x: jax.Array,
) -> jax.Array:
    """The periodic tridiagonal matrix (dl, d, du) times x, along the last
    axis; any leading axes are batch axes. Operands must share one shape and
    one floating-point dtype: the primitive raises TypeError at trace time
    otherwise."""
    return periodic_matvec_p.bind(*(jnp.asarray(a) for a in (dl, d, du, x)))


# --- The computation, in existing JAX operations -----------------------------
def _roll_down(v: jax.Array) -> jax.Array:
    """out[..., i] = v[..., i-1 mod n]."""
    return v if v.shape[-1] == 0 else jnp.roll(v, 1, axis=-1)


def _roll_up(v: jax.Array) -> jax.Array:
    """out[..., i] = v[..., i+1 mod n]."""
    return v if v.shape[-1] == 0 else jnp.roll(v, -1, axis=-1)


def _compute(dl: jax.Array, d: jax.Array, du: jax.Array, x: jax.Array) -> jax.Array:
    return dl * _roll_down(x) + d * x + du * _roll_up(x)


# --- Abstract evaluation: shapes, dtypes, and the primitive's own errors ------
def _abstract_eval(dl: Any, d: Any, du: Any, x: Any) -> jax.core.ShapedArray:
    if x.ndim < 1:
        raise TypeError(f"{_NAME}: x must have at least one axis, got shape {x.shape}")
    for name, aval in zip(("dl", "d", "du"), (dl, d, du), strict=True):
        if aval.shape != x.shape:
            raise TypeError(
                f"{_NAME}: {name} has shape {aval.shape}, but every operand "
                f"must have the shape of x, {x.shape}"
            )
        if aval.dtype != x.dtype:
            raise TypeError(
                f"{_NAME}: {name} has dtype {aval.dtype}, but every operand "
                f"must have the dtype of x, {x.dtype}"
            )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{_NAME}: needs floating-point operands, got {x.dtype}")
    for name, aval in zip(("dl", "d", "du", "x"), (dl, d, du, x), strict=True):
        # A split last axis would put a row's neighbours on other devices.
        spec = aval.sharding.spec
        if len(spec) == aval.ndim and spec[-1] is not None:
            raise TypeError(
                f"{_NAME}: the last axis of {name} is sharded over mesh axis "
                f"{spec[-1]!r}; shard only the leading (batch) axes, or reshard first "
                "(jax.sharding.reshard)"
            )
    return x.update(weak_type=False)


periodic_matvec_p.def_abstract_eval(_abstract_eval)
_compiled = jax.jit(periodic_matvec_p.bind)


def _impl(dl: jax.Array, d: jax.Array, du: jax.Array, x: jax.Array) -> jax.Array:
    _abstract_eval(*(jax.typeof(a) for a in (dl, d, du, x)))
    return _compiled(dl, d, du, x)


periodic_matvec_p.def_impl(_impl)
mlir.register_lowering(
    periodic_matvec_p,
    mlir.lower_fun(_compute, multiple_results=False),
)


# --- JVP: the product rule of a bilinear map ----------------------------------
def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
    dl, d, du, x = primals
    tdl, td, tdu, tx = tangents
    y = periodic_matvec_p.bind(dl, d, du, x)
    terms = []
    if any(type(t) is not ad.Zero for t in (tdl, td, tdu)):
        bands = [ad.instantiate_zeros(t) for t in (tdl, td, tdu)]
        terms.append(periodic_matvec_p.bind(*bands, x))
    if type(tx) is not ad.Zero:
        terms.append(periodic_matvec_p.bind(dl, d, du, tx))
    return y, sum(terms[1:], terms[0])


ad.primitive_jvps[periodic_matvec_p] = _jvp


# --- Transpose: for whichever side the linear program is linear in ------------
def _transpose(ct: Any, dl: Any, d: Any, du: Any, x: Any) -> list[Any]:
    operands = (dl, d, du, x)
    if type(ct) is ad.Zero:
        return [ad.Zero(a.aval) if ad.is_undefined_primal(a) else None for a in operands]
    if ad.is_undefined_primal(x):
        if any(ad.is_undefined_primal(a) for a in (dl, d, du)):
            raise NotImplementedError(f"{_NAME} is bilinear: transpose one side only")
        # The transposed matrix has sub-diagonal du[i-1] and super-diagonal
        # dl[i+1], both modulo n.
        ct_x = periodic_matvec_p.bind(_roll_down(du), d, _roll_up(dl), ct)
        return [None, None, None, ct_x]
    ct_bands = (ct * _roll_down(x), ct * x, ct * _roll_up(x))
    return [
        c if ad.is_undefined_primal(a) else None for c, a in zip(ct_bands, (dl, d, du), strict=True)
    ] + [None]


ad.primitive_transposes[periodic_matvec_p] = _transpose


# --- Batching: one call on a leading batch axis, not a loop -------------------
def _batch(args: tuple[jax.Array, ...], dims: tuple[int | None, ...]) -> tuple[jax.Array, int]:
    size = next(a.shape[b] for a, b in zip(args, dims, strict=True) if b is not None)
    moved = [batching.bdim_at_front(a, b, size) for a, b in zip(args, dims, strict=True)]
    return periodic_matvec_p.bind(*moved), 0


batching.primitive_batchers[periodic_matvec_p] = _batch
