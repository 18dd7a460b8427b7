"""A new JAX primitive: {{ cookiecutter.op_name }}.

TODO: your op. This skeleton is the identity, y = x * 1, with every part a
primitive needs: the function users call, the computation in existing JAX
operations, the abstract evaluation (shapes, dtypes, the op's own errors),
the implementation for eager calls, the lowering, and the JVP, transpose and
batching rules. Replace each with your op's, keeping tests/op_spec.py and
reference.py in step; the tests fail until the three agree.
{%- if cookiecutter.lowering == "ffi" %}

On the CPU the primitive lowers to a custom call to a C++ handler (csrc/,
registered by ffi_target.py); elsewhere to existing StableHLO operations.
{%- endif %}
"""

# JAX's extension points (Primitive.bind, the rule registries' helpers) carry
# no type annotations, so strict mypy would flag every call into them; the
# rest of the package stays strict.
# mypy: disallow-untyped-calls=False, warn-return-any=False

from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
{%- if cookiecutter.lowering == "ffi" %}

from . import ffi_target
{%- endif %}

{{ cookiecutter.op_name }}_p = Primitive("{{ cookiecutter.op_name }}")
# The name each of the primitive's error messages starts with.
_NAME = {{ cookiecutter.op_name }}_p.name


def {{ cookiecutter.op_name }}(x: jax.Array) -> jax.Array:
    """TODO: what your op computes, and what it refuses (the skeleton: x,
    unchanged; any float array)."""
    return {{ cookiecutter.op_name }}_p.bind(*_varying_alike(jnp.asarray(x)))


def _varying_alike(*operands: jax.Array) -> list[jax.Array]:
    """The operands, each cast (jax.lax.pcast) to vary over every mesh axis
    that any of them varies over inside shard_map, as JAX's own operations do
    before they combine values: the result, typed like x, then varies over
    all of them, and the cast's transpose sums a replicated operand's
    cotangent over the devices. Typed from one operand alone, the result of a
    replicated operand and a sharded one would claim to be the same on every
    device. Outside shard_map, a no-op. TODO: pass it every operand you add."""
    varying = [jax.typeof(a).manual_axis_type.varying for a in operands]
    every = frozenset().union(*varying)
    return [
        jax.lax.pcast(a, tuple(sorted(every - v)), to="varying") if every - v else a
        for a, v in zip(operands, varying, strict=True)
    ]


# --- The computation, in existing JAX operations -----------------------------
def _compute(x: jax.Array) -> jax.Array:
    # TODO: your op's formula (benchmarks/bench.py times it, inline, against
    # the primitive).
    return x * 1


# --- Abstract evaluation: shapes, dtypes, and the primitive's own errors ------
def _abstract_eval(x: Any) -> jax.core.ShapedArray:
    # TODO: your op's checks, raised at trace time, and its result's type.
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{_NAME}: needs floating-point operands, got {x.dtype}")
{%- if cookiecutter.lowering == "ffi" %}
    if x.dtype not in ffi_target.DTYPES:
        # Refused at trace time, rather than by the CPU handler at run time.
        handled = ", ".join(ffi_target.DTYPES)
        raise TypeError(f"{_NAME}: the CPU handler computes in {handled}, got {x.dtype}")
{%- endif %}
    # Typed like x: its sharding under an explicit mesh, and the mesh axes it
    # varies over inside shard_map, which update keeps.
    return x.update(weak_type=False)


{{ cookiecutter.op_name }}_p.def_abstract_eval(_abstract_eval)

# Eager calls compile the primitive alone, through the lowering registered
# below for the platform they run on (so they run the same code as jit).
_compiled = jax.jit({{ cookiecutter.op_name }}_p.bind)


def _impl(x: jax.Array) -> jax.Array:
    # Eager calls skip abstract evaluation, so check here too.
    _abstract_eval(jax.typeof(x))
    return _compiled(x)


{{ cookiecutter.op_name }}_p.def_impl(_impl)

{% if cookiecutter.lowering == "ffi" -%}
# --- Lowering: a custom call to the C++ handler on the CPU ---------------------
# A rule registered for a platform takes precedence there; every other
# platform gets the StableHLO lowering.
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


# --- JVP ------------------------------------------------------------------------
def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
    (x,) = primals
    (tx,) = tangents
    # TODO: your op's JVP. The identity is linear: its tangent is the op of
    # the tangent. Write it in terms of the primitive (then the transpose
    # below makes reverse mode) or of existing JAX operations.
    y = {{ cookiecutter.op_name }}_p.bind(x)
    return y, {{ cookiecutter.op_name }}_p.bind(ad.instantiate_zeros(tx))


ad.primitive_jvps[{{ cookiecutter.op_name }}_p] = _jvp


# --- Transpose: for the inputs the op is linear in -----------------------------
def _transpose(ct: Any, x: Any) -> list[Any]:
    # TODO: the transpose of your op's linear part (delete it if the JVP uses
    # only existing JAX operations). The identity is its own transpose.
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None]
    return [{{ cookiecutter.op_name }}_p.bind(ct)]


ad.primitive_transposes[{{ cookiecutter.op_name }}_p] = _transpose


# --- Batching: one call on a leading batch axis, not a loop -------------------
def _batch(args: tuple[jax.Array, ...], dims: tuple[int | None, ...]) -> tuple[jax.Array, int]:
    # TODO: your op's batching rule. The skeleton takes any leading axes, so a
    # vmapped axis moved to the front is one more of them.
    size = next(a.shape[b] for a, b in zip(args, dims, strict=True) if b is not None)
    moved = [batching.bdim_at_front(a, b, size) for a, b in zip(args, dims, strict=True)]
    return {{ cookiecutter.op_name }}_p.bind(*moved), 0


batching.primitive_batchers[{{ cookiecutter.op_name }}_p] = _batch
