"""A new JAX primitive: the tridiagonal matrix-vector product.

    y[..., i] = dl[..., i] * x[..., i-1] + d[..., i] * x[..., i] + du[..., i] * x[..., i+1]

dl, d and du are the sub-, main and super-diagonal in LAPACK's gtsv layout
(that of jax.lax.linalg.tridiagonal_solve): all four operands have the same
shape (*batch, n), and dl[..., 0] and du[..., n-1] lie outside the matrix and
are ignored.

The product is linear in x and, separately, in the three bands, so each rule
below is short and exact: the JVP is the sum of two products, the transpose
with respect to x is the product with the transposed matrix (the primitive
again, so derivatives of every order stay inside it), and batching moves the
batch axis to the front and makes one call instead of a loop.

{% if cookiecutter.lowering == "ffi" -%}
On the CPU the primitive lowers to a custom call to a C++ handler (csrc/,
registered by ffi_target.py); elsewhere to existing StableHLO operations.

{% endif -%}
Only public registration points are used (see the README for which of them
JAX documents as stable): jax.extend.core.Primitive, jax.core.ShapedArray,
jax.interpreters.mlir (lower_fun, register_lowering), jax.interpreters.ad
(primitive_jvps, primitive_transposes, is_undefined_primal, instantiate_zeros,
Zero) and jax.interpreters.batching (primitive_batchers, bdim_at_front).
"""

# JAX's extension points (Primitive.bind, the rule registries' helpers) carry
# no type annotations, so strict mypy would flag every call into them; the
# rest of the package stays strict.
# mypy: disallow-untyped-calls=False, warn-return-any=False

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
{%- if cookiecutter.lowering == "ffi" %}

from . import ffi_target
{%- endif %}

{{ cookiecutter.op_name }}_p = Primitive("{{ cookiecutter.op_name }}")
# The name each of the primitive's error messages starts with.
_NAME = {{ cookiecutter.op_name }}_p.name


def {{ cookiecutter.op_name }}(
    dl: jax.Array,
    d: jax.Array,
    du: jax.Array,
    x: jax.Array,
) -> jax.Array:
    """The tridiagonal matrix (dl, d, du) times x, along the last axis.

    dl, d and du are the sub-, main and super-diagonal; any leading axes are
    batch axes. The first entry of dl and the last of du lie outside the
    matrix and are ignored. Operands must share one shape and
    one floating-point dtype{% if cookiecutter.lowering == "ffi" %} (float32 or float64: those the CPU
    handler computes in){% endif %}: the primitive raises TypeError at trace
    time otherwise (no implicit promotion or broadcasting).
    """
    operands = _varying_alike(*(jnp.asarray(a) for a in (dl, d, du, x)))
    return {{ cookiecutter.op_name }}_p.bind(*operands)


def _varying_alike(*operands: jax.Array) -> list[jax.Array]:
    """The operands, each cast (jax.lax.pcast) to vary over every mesh axis
    that any of them varies over inside shard_map, as JAX's own operations do
    before they combine values. The result, typed like x, then varies over
    all of them, and the cast's transpose sums a replicated operand's
    cotangent over the devices: typed from x alone, an op of a replicated x
    and sharded bands would claim a result that is the same on every device
    (so a wrong out_specs=P() passes and returns one device's block) and give
    x a gradient from one device only. Outside shard_map, a no-op."""
    varying = [jax.typeof(a).manual_axis_type.varying for a in operands]
    every = frozenset().union(*varying)
    return [
        jax.lax.pcast(a, tuple(sorted(every - v)), to="varying") if every - v else a
        for a, v in zip(operands, varying, strict=True)
    ]


# --- The computation, in existing JAX operations -----------------------------
# Each shift slices, then pads back to length n. One lax.pad with a negative
# high edge, (1, -1), reads the same, but XLA:CPU compiles it through an
# (n + 1)-wide buffer: value-and-grad measured 0.64-0.76x the plain formula
# that way, and about 1x with slice-then-pad (benchmarks/bench.py).
def _shift_down(v: jax.Array) -> jax.Array:
    """out[..., i] = v[..., i-1], and 0 at i = 0."""
    if v.shape[-1] == 0:
        return v  # nothing to shift (slicing then padding would make it length 1)
    config = [(0, 0, 0)] * (v.ndim - 1) + [(1, 0, 0)]
    return lax.pad(v[..., :-1], jnp.zeros((), v.dtype), config)


def _shift_up(v: jax.Array) -> jax.Array:
    """out[..., i] = v[..., i+1], and 0 at i = n-1."""
    if v.shape[-1] == 0:
        return v  # nothing to shift (slicing then padding would make it length 1)
    config = [(0, 0, 0)] * (v.ndim - 1) + [(0, 1, 0)]
    return lax.pad(v[..., 1:], jnp.zeros((), v.dtype), config)


def _compute(dl: jax.Array, d: jax.Array, du: jax.Array, x: jax.Array) -> jax.Array:
    # Elementwise along the last axis: O(n) work and memory, where the dense
    # product is O(n^2), and every leading axis stays independent (so a
    # sharded batch axis needs no communication).
    return dl * _shift_down(x) + d * x + du * _shift_up(x)


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
{%- if cookiecutter.lowering == "ffi" %}
    if x.dtype not in ffi_target.DTYPES:
        # Refused here, at trace time, rather than by the CPU handler when the
        # program runs. StableHLO, on the other platforms, could take any float;
        # one list for all keeps a program that traces on one runnable on all.
        handled = ", ".join(ffi_target.DTYPES)
        raise TypeError(f"{_NAME}: the CPU handler computes in {handled}, got {x.dtype}")
{%- endif %}
    varying = {a.manual_axis_type.varying for a in (dl, d, du, x)}
    if len(varying) > 1:
        # What _varying_alike prevents, for a direct bind of the primitive.
        raise TypeError(
            f"{_NAME}: the operands vary over different mesh axes inside shard_map "
            f"({', '.join(str(sorted(v)) for v in varying)}); cast them alike first "
            "(jax.lax.pcast(..., to='varying'))"
        )
    for name, aval in zip(("dl", "d", "du", "x"), (dl, d, du, x), strict=True):
        # Under an explicit mesh an aval names the mesh axes it is split over.
        # A split last axis would put a row's neighbours on other devices:
        # refuse it here rather than fail inside the shifts' slices.
        spec = aval.sharding.spec
        if len(spec) == aval.ndim and spec[-1] is not None:
            raise TypeError(
                f"{_NAME}: the last axis of {name} is sharded over mesh axis "
                f"{spec[-1]!r}; shard only the leading (batch) axes, or reshard first "
                "(jax.sharding.reshard)"
            )
    # The result is typed like x: its sharding under an explicit mesh, and the
    # mesh axes it varies over inside shard_map (manual_axis_type), which
    # jax.grad and shard_map's out_specs check rely on; update keeps both.
    # Every operand varies alike (checked above), so x's axes are all of them.
    return x.update(weak_type=False)


{{ cookiecutter.op_name }}_p.def_abstract_eval(_abstract_eval)

# Eager calls compile the primitive alone, through the lowering registered
# below for the platform they run on (so they run the same code as jit).
_compiled = jax.jit({{ cookiecutter.op_name }}_p.bind)


def _impl(dl: jax.Array, d: jax.Array, du: jax.Array, x: jax.Array) -> jax.Array:
    # Eager calls skip abstract evaluation, so check here too: the user gets
    # the primitive's error, not one from inside its implementation.
    _abstract_eval(*(jax.typeof(a) for a in (dl, d, du, x)))
    return _compiled(dl, d, du, x)


{{ cookiecutter.op_name }}_p.def_impl(_impl)

{% if cookiecutter.lowering == "ffi" -%}
# --- Lowering: a custom call to the C++ handler on the CPU ---------------------
# A rule registered for a platform takes precedence there; every other
# platform gets the StableHLO lowering. A CUDA handler would be registered the
# same way, for "cuda" (jax-ladder's FFI starter shows one).
mlir.register_lowering(
    {{ cookiecutter.op_name }}_p,
    mlir.lower_fun(_compute, multiple_results=False),
)
mlir.register_lowering({{ cookiecutter.op_name }}_p, ffi_target.lowering, platform="cpu")
{%- else -%}
# --- Lowering: to existing StableHLO operations, on every platform ------------
mlir.register_lowering(
    {{ cookiecutter.op_name }}_p,
    mlir.lower_fun(_compute, multiple_results=False),
)
{%- endif %}


# --- JVP: the product rule of a bilinear map ----------------------------------
def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
    dl, d, du, x = primals
    tdl, td, tdu, tx = tangents
    y = {{ cookiecutter.op_name }}_p.bind(dl, d, du, x)
    # Symbolic zeros (ad.Zero) stand for tangents of inputs that are not being
    # differentiated: skip their term rather than multiply by zeros.
    terms = []
    if any(type(t) is not ad.Zero for t in (tdl, td, tdu)):
        bands = [ad.instantiate_zeros(t) for t in (tdl, td, tdu)]
        terms.append({{ cookiecutter.op_name }}_p.bind(*bands, x))
    if type(tx) is not ad.Zero:
        terms.append({{ cookiecutter.op_name }}_p.bind(dl, d, du, tx))
    return y, sum(terms[1:], terms[0])


ad.primitive_jvps[{{ cookiecutter.op_name }}_p] = _jvp


# --- Transpose: for whichever side the linear program is linear in ------------
def _transpose(ct: Any, dl: Any, d: Any, du: Any, x: Any) -> list[Any]:
    # Each JVP term above is linear in either x or the bands, never both, so
    # exactly one side is undefined (ad.UndefinedPrimal) here.
    operands = (dl, d, du, x)
    if type(ct) is ad.Zero:
        return [ad.Zero(a.aval) if ad.is_undefined_primal(a) else None for a in operands]
    if ad.is_undefined_primal(x):
        if any(ad.is_undefined_primal(a) for a in (dl, d, du)):
            raise NotImplementedError(f"{_NAME} is bilinear: transpose one side only")
        # The transposed matrix has sub-diagonal du[i-1] and super-diagonal dl[i+1].
        ct_x = {{ cookiecutter.op_name }}_p.bind(_shift_down(du), d, _shift_up(dl), ct)
        return [None, None, None, ct_x]
    # The bands are linear, x is known: d y_i / d dl_i = x_{i-1}, and so on.
    ct_bands = (ct * _shift_down(x), ct * x, ct * _shift_up(x))
    return [
        c if ad.is_undefined_primal(a) else None for c, a in zip(ct_bands, (dl, d, du), strict=True)
    ] + [None]


ad.primitive_transposes[{{ cookiecutter.op_name }}_p] = _transpose


# --- Batching: one call on a leading batch axis, not a loop -------------------
def _batch(args: tuple[jax.Array, ...], dims: tuple[int | None, ...]) -> tuple[jax.Array, int]:
    # The primitive already takes any leading axes, so a vmapped axis becomes
    # one more of them: move it to the front (an unbatched operand, dim None,
    # is broadcast, which XLA fuses rather than materializes).
    size = next(a.shape[b] for a, b in zip(args, dims, strict=True) if b is not None)
    moved = [batching.bdim_at_front(a, b, size) for a, b in zip(args, dims, strict=True)]
    return {{ cookiecutter.op_name }}_p.bind(*moved), 0


batching.primitive_batchers[{{ cookiecutter.op_name }}_p] = _batch
