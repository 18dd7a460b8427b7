{#- One module, four variants: api (extend: jax.extend.core.Primitive and the
rule registries; hijax: a HiPrim class) times example (the tridiagonal product
or the skeleton's identity), each with or without the C++ handler (lowering).
What they share is written once: the function users call, the operands' cast,
the checks, and the rules' skeleton where it does not depend on the op. -#}
{%- set op = cookiecutter.op_name -%}
{%- set hijax = cookiecutter.api == "hijax" -%}
{%- set ffi = cookiecutter.lowering == "ffi" -%}
{%- set skeleton = cookiecutter.example == "none" -%}
{%- set Op = op.title().replace("_", "") -%}
{#- The primitive's operands, in order: the last one, x, types the result. -#}
{%- set names = ["x"] if skeleton else ["dl", "d", "du", "x"] -%}
{%- set operand_list = names | join(", ") -%}
{%- macro params(type) %}{% for name in names %}{{ name }}: {{ type }}{% if not loop.last %}, {% endif %}{% endfor %}{% endmacro -%}
"""A new JAX primitive{% if hijax %}, defined with HiJAX{% endif %}: {% if skeleton %}{{ op }}.{% else %}the tridiagonal matrix-vector product.{% endif %}
{%- if skeleton %}

TODO: your op. This skeleton is the identity, y = x * 1,
{%- if hijax %} as a subclass of
jax.experimental.hijax.HiPrim: one class holds the implementation (`expand`,
in existing JAX operations) and every rule as a method. Replace each with
your op's, keeping tests/op_spec.py and reference.py in step; the tests fail
until the three agree.
{%- else %} with every part a
primitive needs: the function users call, the computation in existing JAX
operations, the abstract evaluation (shapes, dtypes, the op's own errors),
the implementation for eager calls, the lowering, and the JVP, transpose and
batching rules. Replace each with your op's, keeping tests/op_spec.py and
reference.py in step; the tests fail until the three agree.
{%- endif %}
{%- else %}

    y[..., i] = dl[..., i] * x[..., i-1] + d[..., i] * x[..., i] + du[..., i] * x[..., i+1]

dl, d and du are the sub-, main and super-diagonal in LAPACK's gtsv layout
(that of jax.lax.linalg.tridiagonal_solve): all four operands have the same
shape (*batch, n), and dl[..., 0] and du[..., n-1] lie outside the matrix and
are ignored.
{%- if hijax %}

The primitive is a subclass of jax.experimental.hijax.HiPrim: one class holds
the implementation (`expand`, in existing JAX operations) and every rule as a
method, where the registries of jax.interpreters hold one function each. The
product is linear in x and, separately, in the three bands, so each rule is
short and exact: the JVP is the sum of two products, the transpose with
respect to x is the product with the transposed matrix (the primitive again),
and batching moves the batch axis to the front and makes one call.
{%- else %}

The product is linear in x and, separately, in the three bands, so each rule
below is short and exact: the JVP is the sum of two products, the transpose
with respect to x is the product with the transposed matrix (the primitive
again, so derivatives of every order stay inside it), and batching moves the
batch axis to the front and makes one call instead of a loop.
{%- endif %}
{%- endif %}
{%- if ffi and hijax %}

On the CPU, `expand` calls a C++ handler (csrc/, registered by ffi_target.py)
through jax.ffi.ffi_call; elsewhere it uses existing JAX operations.
{%- elif ffi %}

On the CPU the primitive lowers to a custom call to a C++ handler (csrc/,
registered by ffi_target.py); elsewhere to existing StableHLO operations.
{%- endif %}
{%- if hijax %}

HiJAX is experimental (no deprecation policy): see the README.
{%- elif not skeleton %}

Only public registration points are used (see the README for which of them
JAX documents as stable): jax.extend.core.Primitive, jax.core.ShapedArray,
jax.interpreters.mlir (lower_fun, register_lowering), jax.interpreters.ad
(primitive_jvps, primitive_transposes, is_undefined_primal, instantiate_zeros,
Zero) and jax.interpreters.batching (primitive_batchers, bdim_at_front).
{%- endif %}
"""

{% if hijax -%}
# HiPrim and JAX's helpers carry no type annotations, so strict mypy would flag
# every call into them and the subclass itself; the rest stays strict.
# mypy: disallow-untyped-calls=False, warn-return-any=False, disallow-subclassing-any=False
{%- else -%}
# JAX's extension points (Primitive.bind, the rule registries' helpers) carry
# no type annotations, so strict mypy would flag every call into them; the
# rest of the package stays strict.
# mypy: disallow-untyped-calls=False, warn-return-any=False
{%- endif %}

from typing import Any

import jax
import jax.numpy as jnp
{%- if not skeleton or (ffi and hijax) %}
from jax import lax
{%- endif %}
{%- if hijax %}
from jax.experimental import hijax
{%- if ffi %}
from jax.experimental.xla_metadata import set_xla_metadata
{%- endif %}
from jax.interpreters import batching
{%- else %}
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
{%- endif %}
{%- if ffi %}

from . import ffi_target
{%- endif %}
{%- if hijax %}

# HiPrim came with JAX 0.11 (0.10's jax.experimental.hijax has HiPrimitive, an
# earlier API): refuse here, saying so, rather than fail on the class below.
if not hasattr(hijax, "HiPrim"):
    raise ImportError(
        f"{__name__}: api=hijax needs JAX 0.11 or newer (jax.experimental.hijax.HiPrim); "
        f"JAX {jax.__version__} is installed: pip install 'jax{{ cookiecutter._hijax_jax_spec }}'"
    )
{%- else %}

{{ op }}_p = Primitive("{{ op }}")
{%- endif %}

# The name each of the primitive's error messages starts with.
_NAME = "{{ op }}"


{% if skeleton -%}
def {{ op }}(x: jax.Array) -> jax.Array:
    """TODO: what your op computes, and what it refuses (the skeleton: x,
    unchanged; any float array)."""
    operands = _varying_alike(jnp.asarray(x))
{%- else -%}
def {{ op }}(
    dl: jax.Array,
    d: jax.Array,
    du: jax.Array,
    x: jax.Array,
) -> jax.Array:
    """The tridiagonal matrix (dl, d, du) times x, along the last axis.

    dl, d and du are the sub-, main and super-diagonal; any leading axes are
    batch axes. The first entry of dl and the last of du lie outside the
    matrix and are ignored. Operands must share one shape and
    one floating-point dtype{% if ffi %} (float32 or float64: those the CPU
    handler computes in){% endif %}: the primitive raises TypeError at trace
    time otherwise (no implicit promotion or broadcasting).
    """
    operands = _varying_alike(*(jnp.asarray(a) for a in (dl, d, du, x)))
{%- endif %}
{%- if hijax %}
    primitive = {{ Op }}(*(jax.typeof(a) for a in operands))
    result: jax.Array = primitive(*operands)
    return result
{%- else %}
    return {{ op }}_p.bind(*operands)
{%- endif %}


def _varying_alike(*operands: jax.Array) -> list[jax.Array]:
    """The operands, each cast (jax.lax.pcast) to vary over every mesh axis
    that any of them varies over inside shard_map, as JAX's own operations do
    before they combine values. The result, typed like x, then varies over
    all of them, and the cast's transpose sums a replicated operand's
    cotangent over the devices: typed from x alone, an op of a replicated x
    and a sharded other operand would claim a result that is the same on
    every device (so a wrong out_specs=P() passes and returns one device's
    block) and give x a gradient from one device only. Outside shard_map, a
    no-op.{% if skeleton %} TODO: pass it every operand you add.{% endif %}"""
    varying = [jax.typeof(a).manual_axis_type.varying for a in operands]
    every = frozenset().union(*varying)
    return [
        jax.lax.pcast(a, tuple(sorted(every - v)), to="varying") if every - v else a
        for a, v in zip(operands, varying, strict=True)
    ]


# --- The computation, in existing JAX operations -----------------------------
{%- if skeleton %}
def _compute(x: jax.Array) -> jax.Array:
    # TODO: your op's formula (benchmarks/bench.py times it, inline, against
    # the primitive).
    return x * 1
{%- else %}
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
    # sharded batch axis needs no communication). dl[..., 0] and du[..., n-1]
    # lie outside the matrix: selected away (not multiplied by the zero the
    # shift pads with), so whatever they hold, inf or NaN, stays out of y;
    # x alone is shifted, so a split n exchanges one element per boundary.
    dl, du = _outside_zeroed(dl, du)
    return dl * _shift_down(x) + d * x + du * _shift_up(x)


def _outside_zeroed(dl: jax.Array, du: jax.Array) -> tuple[jax.Array, jax.Array]:
    """dl with its first entry and du with its last set to 0 (selected)."""
    i = lax.broadcasted_iota(jnp.int32, dl.shape, dl.ndim - 1)
    zero = jnp.zeros((), dl.dtype)
    return jnp.where(i == 0, zero, dl), jnp.where(i == dl.shape[-1] - 1, zero, du)
{%- endif %}
{%- if ffi and hijax %}


def _cpu_handler({{ params("jax.Array") }}) -> jax.Array:
    # num_batch_dims: XLA may split every axis but the last across devices
    # (see ffi_target.py); set_xla_metadata puts it on the custom call. The
    # result type is x's, sharding included (as _compute's result has it).
    with set_xla_metadata(num_batch_dims=str(x.ndim - 1)):
        call = jax.ffi.ffi_call(ffi_target.TARGET, jax.typeof(x))
        result: jax.Array = call({{ operand_list }})
    return result
{%- endif %}


{% if hijax -%}
# --- Type checking: shapes, dtypes, and the primitive's own errors ------------
def _result_type({{ params("Any") }}) -> jax.core.ShapedArray:
{%- else -%}
# --- Abstract evaluation: shapes, dtypes, and the primitive's own errors ------
def _abstract_eval({{ params("Any") }}) -> jax.core.ShapedArray:
{%- endif %}
{%- if skeleton %}
    # TODO: your op's checks, raised at trace time, and its result's type.
{%- else %}
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
{%- endif %}
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{_NAME}: needs floating-point operands, got {x.dtype}")
{%- if ffi %}
    if x.dtype not in ffi_target.DTYPES:
        # Refused here, at trace time, rather than by the CPU handler when the
        # program runs. StableHLO, on the other platforms, could take any float;
        # one list for all keeps a program that traces on one runnable on all.
        handled = ", ".join(ffi_target.DTYPES)
        raise TypeError(f"{_NAME}: the CPU handler computes in {handled}, got {x.dtype}")
{%- endif %}
{%- if skeleton %}
    # Typed like x: its sharding under an explicit mesh, and the mesh axes it
    # varies over inside shard_map, which update keeps.
{%- else %}
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
{%- endif %}
    return x.update(weak_type=False)
{%- if hijax %}


class {{ Op }}(hijax.HiPrim):
    """The primitive for one set of operand types (abstract values): each call
    of the op makes an instance, and binding it records one equation. Eager
    calls run through the same path, so the checks in _result_type run for
    them too."""

    def __init__(self, {{ params("Any") }}) -> None:
        self.out_aval = _result_type({{ operand_list }})
        self.in_avals = ({{ operand_list }}{% if skeleton %},{% endif %})
        # HiPrim compares and hashes instances by their params (JAX caches
        # traced programs by them): the types must be part of them.
        self.params = {"shape": x.shape, "dtype": x.dtype}
        super().__init__()

    def expand(self, {{ params("Any") }}) -> Any:
        """The implementation in existing JAX operations: what the primitive
        becomes when JAX lowers it."""
{%- if ffi %}
        # One branch per platform; each platform compiles only its own.
        return lax.platform_dependent({{ operand_list }}, cpu=_cpu_handler, default=_compute)
{%- else %}
        return _compute({{ operand_list }})
{%- endif %}

    # Reverse mode and linearize (jax.linearize, jax.linear_transpose) derived
    # from the JVP and the transpose below.
    vjp_fwd, vjp_bwd_retval = hijax.vjp_from_jvp
    lin, linearized = hijax.linearize_from_jvp
{%- if skeleton %}

    def jvp(self, primals: Any, tangents: Any) -> tuple[Any, Any]:
        """TODO: your op's JVP. The identity is linear: its tangent is the op
        of the tangent."""
        (x,) = primals
        (tx,) = (hijax.instantiate_zeros(t) for t in tangents)
        return {{ op }}(x), {{ op }}(tx)

    def transpose(self, ct: Any, x: Any) -> None:
        """TODO: the transpose of your op's linear part: the linear inputs
        arrive as hijax.GradAccum accumulators. The identity is its own."""
        if isinstance(x, hijax.GradAccum):
            x.accum({{ op }}(ct))
{%- else %}

    def jvp(self, primals: Any, tangents: Any) -> tuple[Any, Any]:
        """The product rule of a bilinear map, in terms of the primitive."""
        dl, d, du, x = primals
        tdl, td, tdu, tx = (hijax.instantiate_zeros(t) for t in tangents)
        tangent = {{ op }}(tdl, td, tdu, x)
        tangent += {{ op }}(dl, d, du, tx)
        return {{ op }}(dl, d, du, x), tangent

    def transpose(self, ct: Any, dl: Any, d: Any, du: Any, x: Any) -> None:
        """The linear inputs arrive as hijax.GradAccum accumulators, the others
        as values. Each JVP term is linear in x or in the bands, never both."""
        if isinstance(x, hijax.GradAccum):
            # The transposed matrix has sub-diagonal du[i-1] and super-diagonal dl[i+1].
            x.accum({{ op }}(_shift_down(du), d, _shift_up(dl), ct))
            return
        # The bands are linear, x is known: d y_i / d dl_i = x_{i-1}, and so on.
        ct_bands = (ct * _shift_down(x), ct * x, ct * _shift_up(x))
        for band, ct_band in zip((dl, d, du), ct_bands, strict=True):
            if isinstance(band, hijax.GradAccum):
                band.accum(ct_band)
{%- endif %}

    def batch(self, axis_data: Any, args: Any, dims: Any) -> tuple[Any, int | None]:
{%- if skeleton %}
        """TODO: your op's batching rule. The skeleton takes any leading axes,
        so the vmapped axis moved to the front is one more."""
{%- else %}
        """One call on a leading batch axis, not a loop: the primitive already
        takes any leading axes, so the vmapped axis becomes one more."""
{%- endif %}
        if all(b is None for b in dims):
            # Nothing batched: JAX calls this rule anyway for a call made
            # inside another rule under vmap (the primal in the JVP, under
            # jax.jacfwd), and that result must stay unbatched.
            return {{ op }}(*args), None
        # hijax.bdims_at_front (JAX 0.12 on) does this; JAX 0.11 lacks it.
        size, mesh_axis = axis_data.size, axis_data.explicit_mesh_axis
        moved = [
            batching.bdim_at_front(a, b, size, mesh_axis) for a, b in zip(args, dims, strict=True)
        ]
        return {{ op }}(*moved), 0
{%- else %}


{{ op }}_p.def_abstract_eval(_abstract_eval)

# Eager calls compile the primitive alone, through the lowering registered
# below for the platform they run on (so they run the same code as jit).
_compiled = jax.jit({{ op }}_p.bind)


def _impl({{ params("jax.Array") }}) -> jax.Array:
    # Eager calls skip abstract evaluation, so check here too: the user gets
    # the primitive's error, not one from inside its implementation.
    _abstract_eval({% if skeleton %}jax.typeof(x){% else %}*(jax.typeof(a) for a in ({{ operand_list }})){% endif %})
    return _compiled({{ operand_list }})


{{ op }}_p.def_impl(_impl)

{% if ffi -%}
# --- Lowering: a custom call to the C++ handler on the CPU ---------------------
# A rule registered for a platform takes precedence there; every other
# platform gets the StableHLO lowering. A CUDA handler would be registered the
# same way, for "cuda" (jax-ladder's FFI starter shows one).
{%- else -%}
# --- Lowering: to existing StableHLO operations, on every platform ------------
{%- endif %}
mlir.register_lowering(
    {{ op }}_p,
    mlir.lower_fun(_compute, multiple_results=False),
)
{%- if ffi %}
mlir.register_lowering({{ op }}_p, ffi_target.lowering, platform="cpu")
{%- endif %}
{%- if skeleton %}


# --- JVP ------------------------------------------------------------------------
def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
    (x,) = primals
    (tx,) = tangents
    # TODO: your op's JVP. The identity is linear: its tangent is the op of
    # the tangent. Write it in terms of the primitive (then the transpose
    # below makes reverse mode) or of existing JAX operations.
    y = {{ op }}_p.bind(x)
    return y, {{ op }}_p.bind(ad.instantiate_zeros(tx))


ad.primitive_jvps[{{ op }}_p] = _jvp


# --- Transpose: for the inputs the op is linear in -----------------------------
def _transpose(ct: Any, x: Any) -> list[Any]:
    # TODO: the transpose of your op's linear part (delete it if the JVP uses
    # only existing JAX operations). The identity is its own transpose.
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None]
    return [{{ op }}_p.bind(ct)]
{%- else %}


# --- JVP: the product rule of a bilinear map ----------------------------------
def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
    dl, d, du, x = primals
    tdl, td, tdu, tx = tangents
    y = {{ op }}_p.bind(dl, d, du, x)
    # Symbolic zeros (ad.Zero) stand for tangents of inputs that are not being
    # differentiated: skip their term rather than multiply by zeros.
    terms = []
    if any(type(t) is not ad.Zero for t in (tdl, td, tdu)):
        bands = [ad.instantiate_zeros(t) for t in (tdl, td, tdu)]
        terms.append({{ op }}_p.bind(*bands, x))
    if type(tx) is not ad.Zero:
        terms.append({{ op }}_p.bind(dl, d, du, tx))
    return y, sum(terms[1:], terms[0])


ad.primitive_jvps[{{ op }}_p] = _jvp


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
        ct_x = {{ op }}_p.bind(_shift_down(du), d, _shift_up(dl), ct)
        return [None, None, None, ct_x]
    # The bands are linear, x is known: d y_i / d dl_i = x_{i-1}, and so on.
    ct_bands = (ct * _shift_down(x), ct * x, ct * _shift_up(x))
    return [
        c if ad.is_undefined_primal(a) else None for c, a in zip(ct_bands, (dl, d, du), strict=True)
    ] + [None]
{%- endif %}


ad.primitive_transposes[{{ op }}_p] = _transpose


# --- Batching: one call on a leading batch axis, not a loop -------------------
def _batch(args: tuple[jax.Array, ...], dims: tuple[int | None, ...]) -> tuple[jax.Array, int]:
{%- if skeleton %}
    # TODO: your op's batching rule. The skeleton takes any leading axes, so a
    # vmapped axis moved to the front is one more of them.
{%- else %}
    # The primitive already takes any leading axes, so a vmapped axis becomes
    # one more of them: move it to the front (an unbatched operand, dim None,
    # is broadcast, which XLA fuses rather than materializes).
{%- endif %}
    size = next(a.shape[b] for a, b in zip(args, dims, strict=True) if b is not None)
    moved = [batching.bdim_at_front(a, b, size) for a, b in zip(args, dims, strict=True)]
    return {{ op }}_p.bind(*moved), 0


batching.primitive_batchers[{{ op }}_p] = _batch
{%- endif %}
