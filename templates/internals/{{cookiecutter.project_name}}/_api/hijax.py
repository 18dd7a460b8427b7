"""A new JAX primitive, defined with HiJAX: the tridiagonal matrix-vector product.

    y[..., i] = dl[..., i] * x[..., i-1] + d[..., i] * x[..., i] + du[..., i] * x[..., i+1]

dl, d and du are the sub-, main and super-diagonal in LAPACK's gtsv layout
(that of jax.lax.linalg.tridiagonal_solve): all four operands have the same
shape (*batch, n), and dl[..., 0] and du[..., n-1] lie outside the matrix and
are ignored.

The primitive is a subclass of jax.experimental.hijax.HiPrim: one class holds
the implementation (`expand`, in existing JAX operations) and every rule as a
method, where the registries of jax.interpreters hold one function each. The
product is linear in x and, separately, in the three bands, so each rule is
short and exact: the JVP is the sum of two products, the transpose with
respect to x is the product with the transposed matrix (the primitive again),
and batching moves the batch axis to the front and makes one call.
{%- if cookiecutter.lowering == "ffi" %}

On the CPU, `expand` calls a C++ handler (csrc/, registered by ffi_target.py)
through jax.ffi.ffi_call; elsewhere it uses existing JAX operations.
{%- endif %}

HiJAX is experimental (no deprecation policy): see the README.
"""

# HiPrim and JAX's helpers carry no type annotations, so strict mypy would flag
# every call into them and the subclass itself; the rest stays strict.
# mypy: disallow-untyped-calls=False, warn-return-any=False, disallow-subclassing-any=False

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import hijax
{%- if cookiecutter.lowering == "ffi" %}
from jax.experimental.xla_metadata import set_xla_metadata
{%- endif %}
from jax.interpreters import batching
{%- if cookiecutter.lowering == "ffi" %}

from . import ffi_target
{%- endif %}

# HiPrim came with JAX 0.11 (0.10's jax.experimental.hijax has HiPrimitive, an
# earlier API): refuse here, saying so, rather than fail on the class below.
if not hasattr(hijax, "HiPrim"):
    raise ImportError(
        f"{__name__}: api=hijax needs JAX 0.11 or newer (jax.experimental.hijax.HiPrim); "
        f"JAX {jax.__version__} is installed: pip install 'jax>=0.11,<0.13'"
    )


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
    primitive = {{ cookiecutter.op_name.title().replace("_", "") }}(*(jax.typeof(a) for a in operands))
    result: jax.Array = primitive(*operands)
    return result


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


# The name each of the primitive's error messages starts with.
_NAME = "{{ cookiecutter.op_name }}"


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
{%- if cookiecutter.lowering == "ffi" %}


def _cpu_handler(dl: jax.Array, d: jax.Array, du: jax.Array, x: jax.Array) -> jax.Array:
    # num_batch_dims: XLA may split every axis but the last across devices
    # (see ffi_target.py); set_xla_metadata puts it on the custom call. The
    # result type is x's, sharding included (as _compute's result has it).
    with set_xla_metadata(num_batch_dims=str(x.ndim - 1)):
        call = jax.ffi.ffi_call(ffi_target.TARGET, jax.typeof(x))
        result: jax.Array = call(dl, d, du, x)
    return result
{%- endif %}


# --- Type checking: shapes, dtypes, and the primitive's own errors ------------
def _result_type(dl: Any, d: Any, du: Any, x: Any) -> jax.core.ShapedArray:
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


class {{ cookiecutter.op_name.title().replace("_", "") }}(hijax.HiPrim):
    """The primitive for one set of operand types (abstract values): each call
    of the op makes an instance, and binding it records one equation. Eager
    calls run through the same path, so the checks in _result_type run for
    them too."""

    def __init__(self, dl: Any, d: Any, du: Any, x: Any) -> None:
        self.out_aval = _result_type(dl, d, du, x)
        self.in_avals = (dl, d, du, x)
        # HiPrim compares and hashes instances by their params (JAX caches
        # traced programs by them): the types must be part of them.
        self.params = {"shape": x.shape, "dtype": x.dtype}
        super().__init__()

    def expand(self, dl: Any, d: Any, du: Any, x: Any) -> Any:
        """The implementation in existing JAX operations: what the primitive
        becomes when JAX lowers it."""
{%- if cookiecutter.lowering == "ffi" %}
        # One branch per platform; each platform compiles only its own.
        return lax.platform_dependent(dl, d, du, x, cpu=_cpu_handler, default=_compute)
{%- else %}
        return _compute(dl, d, du, x)
{%- endif %}

    # Reverse mode and linearize (jax.linearize, jax.linear_transpose) derived
    # from the JVP and the transpose below.
    vjp_fwd, vjp_bwd_retval = hijax.vjp_from_jvp
    lin, linearized = hijax.linearize_from_jvp

    def jvp(self, primals: Any, tangents: Any) -> tuple[Any, Any]:
        """The product rule of a bilinear map, in terms of the primitive."""
        dl, d, du, x = primals
        tdl, td, tdu, tx = (hijax.instantiate_zeros(t) for t in tangents)
        tangent = {{ cookiecutter.op_name }}(tdl, td, tdu, x)
        tangent += {{ cookiecutter.op_name }}(dl, d, du, tx)
        return {{ cookiecutter.op_name }}(dl, d, du, x), tangent

    def transpose(self, ct: Any, dl: Any, d: Any, du: Any, x: Any) -> None:
        """The linear inputs arrive as hijax.GradAccum accumulators, the others
        as values. Each JVP term is linear in x or in the bands, never both."""
        if isinstance(x, hijax.GradAccum):
            # The transposed matrix has sub-diagonal du[i-1] and super-diagonal dl[i+1].
            x.accum({{ cookiecutter.op_name }}(_shift_down(du), d, _shift_up(dl), ct))
            return
        # The bands are linear, x is known: d y_i / d dl_i = x_{i-1}, and so on.
        ct_bands = (ct * _shift_down(x), ct * x, ct * _shift_up(x))
        for band, ct_band in zip((dl, d, du), ct_bands, strict=True):
            if isinstance(band, hijax.GradAccum):
                band.accum(ct_band)

    def batch(self, axis_data: Any, args: Any, dims: Any) -> tuple[Any, int | None]:
        """One call on a leading batch axis, not a loop: the primitive already
        takes any leading axes, so the vmapped axis becomes one more."""
        if all(b is None for b in dims):
            # Nothing batched: JAX calls this rule anyway for a call made
            # inside another rule under vmap (the primal in the JVP, under
            # jax.jacfwd), and that result must stay unbatched.
            return {{ cookiecutter.op_name }}(*args), None
        # hijax.bdims_at_front (JAX 0.12 on) does this; JAX 0.11 lacks it.
        size, mesh_axis = axis_data.size, axis_data.explicit_mesh_axis
        moved = [
            batching.bdim_at_front(a, b, size, mesh_axis) for a, b in zip(args, dims, strict=True)
        ]
        return {{ cookiecutter.op_name }}(*moved), 0
