"""The op: the identity y = x * 1 as a Pallas kernel (kernel.py), differentiable
through a custom VJP. Second order differentiates the custom VJP's forward
and backward: there each kernel call has a plain-JAX twin, whose derivative
JAX takes instead (composition.kernel_call).

TODO: make this your op: the public function's arguments and input checks
(check_operands), the kernel call, the custom VJP's forward and backward, the
per-shard specs, and SHARDING_RULE and WHOLE_AXES (from which partitioning.py
builds the custom_partitioning rule for jit with Auto shardings).

Around the kernel, as in the worked example (composition.py):
implementation="auto" | "kernel" | "reference" (IMPLEMENTATION_ENV overrides
it), chosen per lowering platform; under Explicit mesh axes the kernel runs
per shard through jax.shard_map, and so does each slice of a vmapped batch
split over them.
"""

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import backend, composition, kernel
from .reference import {{ cookiecutter.op_name }}_reference

DTYPES = (jnp.float32, jnp.bfloat16)
# TODO: your op's sharding, einsum-like (each operand's axes -> the output's),
# and the axes the kernel needs whole on each device. The identity is
# elementwise: any axis shards with no communication.
SHARDING_RULE = "m n -> m n"
WHOLE_AXES: tuple[str, ...] = ()
BACKWARD = "{{ cookiecutter.backward }}"  # "kernel": Pallas backward; "reference": XLA's

# Set to kernel or reference to force that implementation on every call.
# Read when the op is traced: set it before the first jit call.
IMPLEMENTATION_ENV = "{{ cookiecutter.package_name.upper() }}_IMPLEMENTATION"


def {{ cookiecutter.op_name }}(
    x: ArrayLike,
    *,
    implementation: composition.Implementation = "auto",
    block_m: int | None = None,
    interpret: backend.Interpret = None,
) -> jax.Array:
    """TODO: your op. Here: x (m, n) * 1, in the dtype of x.

    implementation: kernel runs the Pallas kernel (interpreted where its
    hardware is absent), reference the plain-JAX reference, auto the kernel
    where the program is lowered for the kernel's platform and the reference
    elsewhere. block_m: rows per block (default kernel.DEFAULT_BLOCK_M).
    """
    x = jnp.asarray(x)
    check_operands(x)
    run = partial(kernel_only, block_m=block_m)
    reference = {{ cookiecutter.op_name }}_reference
    return composition.implement(
        implementation, IMPLEMENTATION_ENV, backend.PLATFORM, run, reference, x, interpret=interpret
    )


def kernel_only(
    x: jax.Array, *, block_m: int | None = None, interpret: backend.Interpret = None
) -> jax.Array:
    """The kernel, whatever IMPLEMENTATION_ENV says, on a checked operand."""
    again = partial(kernel_only, block_m=block_m)
    if composition.explicitly_sharded(x):
        # pallas_call needs Manual mesh axes: run it per shard, on local shapes.
        return _per_shard(partial(again, interpret=interpret), x)
    if interpret is None:
        return backend.native_or_interpreted(
            partial(again, interpret=False), partial(again, interpret=True), x
        )
    bm: object = kernel.DEFAULT_BLOCK_M if block_m is None else block_m
    if not isinstance(bm, int) or bm < 1:
        raise ValueError(f"block_m must be a positive int, got {bm!r}")
    (x,), _ = composition.vary_alike([x])
    return _differentiable(x, bm, interpret)


def check_operands(x: jax.Array) -> None:
    """TODO: your op's shapes and dtypes."""
    if x.ndim != 2:
        raise ValueError(f"expected x (m, n), got shape {x.shape}")
    if x.dtype not in DTYPES:
        raise TypeError(f"x must be float32 or bfloat16, got {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"empty operand: x {x.shape}")


# --- the custom VJP -----------------------------------------------------------------


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _differentiable(x: jax.Array, bm: int, interpret: backend.Interpret) -> jax.Array:
    return _scale(x, 1.0, bm, interpret)


def _scale(x: jax.Array, factor: float, bm: int, interpret: backend.Interpret) -> jax.Array:
    """The kernel call (TODO: yours, and its twin: the same maths in plain
    JAX), batched per shard (composition.kernel_call)."""
    call = partial(kernel.scale, factor=factor, block_m=bm, interpret=interpret)
    y: jax.Array = composition.kernel_call(call, lambda x: x * factor)(x)
    return y


{% if cookiecutter.backward == "kernel" -%}
def _fwd(x: jax.Array, bm: int, interpret: backend.Interpret) -> tuple[jax.Array, None]:
    return _scale(x, 1.0, bm, interpret), None


def _bwd(bm: int, interpret: backend.Interpret, _: None, g: jax.Array) -> tuple[jax.Array]:
    # TODO: your op's backward. The identity's: dx = g * 1, the same kernel.
    return (_scale(g, 1.0, bm, interpret),)
{%- else -%}
def _fwd(x: jax.Array, bm: int, interpret: backend.Interpret) -> tuple[jax.Array, jax.Array]:
    return _scale(x, 1.0, bm, interpret), x


def _bwd(bm: int, interpret: backend.Interpret, x: jax.Array, g: jax.Array) -> tuple[jax.Array]:
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
    return composition.per_shard(local, (P(rows, cols),), P(rows, cols), x)
