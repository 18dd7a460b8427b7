"""A new JAX primitive, defined with HiJAX: {{ cookiecutter.op_name }}.

TODO: your op. This skeleton is the identity, y = x * 1, as a subclass of
jax.experimental.hijax.HiPrim: one class holds the implementation (`expand`,
in existing JAX operations) and every rule as a method. Replace each with
your op's, keeping tests/op_spec.py and reference.py in step; the tests fail
until the three agree.
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
{%- if cookiecutter.lowering == "ffi" %}
from jax import lax
{%- endif %}
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


def {{ cookiecutter.op_name }}(x: jax.Array) -> jax.Array:
    """TODO: what your op computes, and what it refuses (the skeleton: x,
    unchanged; any float array)."""
    (operand,) = _varying_alike(jnp.asarray(x))
    primitive = {{ cookiecutter.op_name.title().replace("_", "") }}(jax.typeof(operand))
    result: jax.Array = primitive(operand)
    return result


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


# The name each of the primitive's error messages starts with.
_NAME = "{{ cookiecutter.op_name }}"


# --- The computation, in existing JAX operations -----------------------------
def _compute(x: jax.Array) -> jax.Array:
    # TODO: your op's formula (benchmarks/bench.py times it, inline, against
    # the primitive).
    return x * 1
{%- if cookiecutter.lowering == "ffi" %}


def _cpu_handler(x: jax.Array) -> jax.Array:
    # num_batch_dims: XLA may split every axis but the last across devices
    # (see ffi_target.py); set_xla_metadata puts it on the custom call.
    with set_xla_metadata(num_batch_dims=str(x.ndim - 1)):
        call = jax.ffi.ffi_call(ffi_target.TARGET, jax.typeof(x))
        result: jax.Array = call(x)
    return result
{%- endif %}


# --- Type checking: shapes, dtypes, and the primitive's own errors ------------
def _result_type(x: Any) -> jax.core.ShapedArray:
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


class {{ cookiecutter.op_name.title().replace("_", "") }}(hijax.HiPrim):
    """The primitive for one set of operand types (abstract values): each call
    of the op makes an instance, and binding it records one equation."""

    def __init__(self, x: Any) -> None:
        self.out_aval = _result_type(x)
        self.in_avals = (x,)
        # HiPrim compares and hashes instances by their params (JAX caches
        # traced programs by them): the types must be part of them.
        self.params = {"shape": x.shape, "dtype": x.dtype}
        super().__init__()

    def expand(self, x: Any) -> Any:
        """The implementation in existing JAX operations."""
{%- if cookiecutter.lowering == "ffi" %}
        return lax.platform_dependent(x, cpu=_cpu_handler, default=_compute)
{%- else %}
        return _compute(x)
{%- endif %}

    # Reverse mode and linearize derived from the JVP and the transpose below.
    vjp_fwd, vjp_bwd_retval = hijax.vjp_from_jvp
    lin, linearized = hijax.linearize_from_jvp

    def jvp(self, primals: Any, tangents: Any) -> tuple[Any, Any]:
        """TODO: your op's JVP. The identity is linear: its tangent is the op
        of the tangent."""
        (x,) = primals
        (tx,) = (hijax.instantiate_zeros(t) for t in tangents)
        return {{ cookiecutter.op_name }}(x), {{ cookiecutter.op_name }}(tx)

    def transpose(self, ct: Any, x: Any) -> None:
        """TODO: the transpose of your op's linear part: the linear inputs
        arrive as hijax.GradAccum accumulators. The identity is its own."""
        if isinstance(x, hijax.GradAccum):
            x.accum({{ cookiecutter.op_name }}(ct))

    def batch(self, axis_data: Any, args: Any, dims: Any) -> tuple[Any, int | None]:
        """TODO: your op's batching rule. The skeleton takes any leading axes,
        so the vmapped axis moved to the front is one more."""
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
