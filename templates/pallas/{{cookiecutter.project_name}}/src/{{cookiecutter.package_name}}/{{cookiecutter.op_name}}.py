"""gelu(a @ b + bias) as one Pallas kernel, differentiable through a custom VJP.

pallas_call has no autodiff rule, so the forward kernel is wrapped in
jax.custom_vjp.
{%- if cookiecutter.backward == "kernel" %} The forward also writes the float32 pre-activation z,
which the backward needs for GELU's derivative; the backward then runs the
same matmul kernel twice, reading the operands transposed through the
BlockSpecs: da = dz @ b^T and db = a^T @ dz.
{%- else %} The backward is the plain-JAX reference's VJP (XLA's
matmuls): the right choice until a profile says the backward is your
bottleneck.
{%- endif %}

Second order (grad of grad, jax.hessian) differentiates the custom VJP's own
forward and backward: there each kernel call has a plain-JAX twin, whose
derivative JAX takes instead (composition.kernel_call).

Around the kernel, what makes it usable in a model (composition.py):

- implementation="auto" | "kernel" | "reference" (and the environment
  variable IMPLEMENTATION_ENV, which overrides it everywhere): "auto" runs the
  kernel on its own hardware and the plain-JAX reference anywhere else,
  chosen per platform the program is lowered for (lax.platform_dependent),
  or in an eager call by the devices its arrays are on, not by the host that
  traces it: exported for a TPU from a CPU host, the program holds the
  kernel; on a TPU host, arrays on a CPU device get the reference.
- Block sizes come from the tuned table (block_table.py) for the device the
  kernel runs on when the caller gives none, else from kernel.default_blocks.
- Under a mesh with Explicit axes (jax.set_mesh), the kernel runs once per
  shard through jax.shard_map (_per_shard); so does each slice of a vmapped
  batch split over Explicit mesh axes (composition.batches_per_shard). For
  jit with Auto shardings, see partitioning.py, which works from
  SHARDING_RULE and WHOLE_AXES below.
"""

from collections.abc import Callable
from functools import partial
from typing import NamedTuple, TypeAlias

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from . import backend, block_table, composition, kernel
from .reference import {{ cookiecutter.op_name }}_reference

DTYPES = (jnp.float32, jnp.bfloat16)
# The op's sharding, declared for partitioning.py's custom_partitioning rule
# (jit with Auto shardings): each operand's axes and the output's, einsum-like,
# and the axes the kernel needs whole on each device (the contracted k: the
# GELU after the sum cannot run on partial sums).
SHARDING_RULE = "m k, k n, n -> m n"
WHOLE_AXES = ("k",)
BACKWARD = "{{ cookiecutter.backward }}"  # "kernel": Pallas backward; "reference": XLA's

# Set to kernel or reference to force that implementation on every call,
# whatever the caller passed (say, reference to rule the kernel out of a bug
# hunt). Read when the op is traced: set it before the first jit call.
IMPLEMENTATION_ENV = "{{ cookiecutter.package_name.upper() }}_IMPLEMENTATION"


class Blocks(NamedTuple):
    """Block sizes, as kernel.matmul takes them (**blocks._asdict()). A tuple,
    so hashable, as the custom VJP's non-differentiable arguments must be."""

    block_m: int
    block_n: int
    block_k: int


def {{ cookiecutter.op_name }}(
    a: ArrayLike,
    b: ArrayLike,
    bias: ArrayLike,
    *,
    implementation: composition.Implementation = "auto",
    block_m: int | None = None,
    block_n: int | None = None,
    block_k: int | None = None,
    interpret: backend.Interpret = None,
) -> jax.Array:
    """gelu(a (m, k) @ b (k, n) + bias (n,)), in the dtype of a.

    implementation: kernel runs the Pallas kernel (interpreted, on the CPU,
    where its hardware is absent: slow, for tests), reference the plain-JAX
    reference, auto the kernel where the program is lowered for the kernel's
    platform and the reference for any other (so a program exported from a
    CPU host for the kernel's platform holds the kernel). The environment
    variable IMPLEMENTATION_ENV overrides it.

    Block sizes not given come from the tuned table for the device the kernel
    runs on (block_table.py), else kernel.default_blocks, and are checked
    against the target's tiling rules before anything is lowered.
    interpret=None runs the kernel natively on its target and interpreted
    elsewhere; pass True / False (or the interpreter's settings) to choose.
    """
    a, b, bias = jnp.asarray(a), jnp.asarray(b), jnp.asarray(bias)
    check_operands(a, b, bias)
    run = partial(kernel_only, block_m=block_m, block_n=block_n, block_k=block_k)
    return composition.implement(
        implementation,
        IMPLEMENTATION_ENV,
        backend.PLATFORM,
        run,
        {{ cookiecutter.op_name }}_reference,
        a,
        b,
        bias,
        interpret=interpret,
    )


def kernel_only(
    a: jax.Array,
    b: jax.Array,
    bias: jax.Array,
    *,
    block_m: int | None = None,
    block_n: int | None = None,
    block_k: int | None = None,
    interpret: backend.Interpret = None,
) -> jax.Array:
    """{{ cookiecutter.op_name }}'s kernel, whatever IMPLEMENTATION_ENV says (the tuner times
    this), on operands {{ cookiecutter.op_name }} has checked.

    interpret=None runs the kernel natively where the program is lowered for
    the kernel's platform and interpreted elsewhere (backend.native_or_interpreted),
    each with the block sizes tuned for the device it runs on: the block table
    is read for the target's device kind, not this host's (block_table.py).
    """
    # This function again, with the same blocks: per shard, or once the
    # platform decides whether the kernel is native or interpreted.
    again = partial(kernel_only, block_m=block_m, block_n=block_n, block_k=block_k)
    if composition.explicitly_sharded(a, b, bias):
        # pallas_call needs Manual mesh axes: run it per shard, on local shapes.
        return _per_shard(partial(again, interpret=interpret), a, b, bias)
    if interpret is None:
        return backend.native_or_interpreted(
            partial(again, interpret=False), partial(again, interpret=True), a, b, bias
        )
    # Tuned for the device the kernel runs on: native, one of the kernel's
    # platform (maybe not this host's); interpreted, this host's.
    if interpret is False:
        kind = block_table.target_device_kind(backend.PLATFORM)
    else:
        kind = block_table.device_kind()
    blocks, table = _blocks(a, b, kind, interpret is False, block_m, block_n, block_k)
    try:
        _check_all_blocks(a, b, bias, blocks, interpret)
    except ValueError as error:
        if table is None:
            raise
        raise ValueError(
            f"the tuned blocks for this shape in {table} are invalid: {error}"
        ) from None
    # Inside jax.shard_map, the custom VJP's operands must vary over the same
    # mesh axes as its result, so that each cotangent has its operand's type:
    # the cast's transpose sums db over the row shards, da over the columns.
    (a, b, bias), _ = composition.vary_alike([a, b, bias])
    return _differentiable(a, b, bias, blocks, interpret)


def check_operands(a: jax.Array, b: jax.Array, bias: jax.Array) -> None:
    if a.ndim != 2 or b.ndim != 2 or bias.ndim != 1:
        raise ValueError(
            f"expected a (m, k), b (k, n), bias (n,); got shapes {a.shape}, {b.shape}, {bias.shape}"
        )
    if a.shape[1] != b.shape[0] or bias.shape[0] != b.shape[1]:
        raise ValueError(f"shapes do not agree: a {a.shape} @ b {b.shape} + bias {bias.shape}")
    if a.dtype not in DTYPES or b.dtype != a.dtype or bias.dtype != a.dtype:
        raise TypeError(
            f"a, b and bias must share one dtype, float32 or bfloat16; got {a.dtype}, "
            f"{b.dtype}, {bias.dtype}"
        )
    if 0 in a.shape or 0 in b.shape:
        raise ValueError(f"empty operands: a {a.shape}, b {b.shape}")


def _blocks(
    a: jax.Array,
    b: jax.Array,
    device_kind: str | None,
    native: bool,
    block_m: int | None,
    block_n: int | None,
    block_k: int | None,
) -> tuple[Blocks, str | None]:
    """The caller's block sizes; those not given from the tuned table for this
    device kind, dtype and shape, else the kernel's defaults: natively, those
    for this shape on the chip (kernel.default_blocks); interpreted,
    kernel.DEFAULT_BLOCKS (the interpreter has no VMEM to fill, and small
    blocks keep the tests' ragged edges inside the grid). Also returns the
    table's path when an entry was used, for error messages."""
    (m, k), n = a.shape, b.shape[1]
    tuned = block_table.lookup(device_kind, a.dtype, m, k, n)
    if tuned is not None:
        defaults = tuned.blocks
    elif native:
        defaults = kernel.default_blocks(m, k, n, jnp.dtype(a.dtype).itemsize)
    else:
        defaults = kernel.DEFAULT_BLOCKS
    given = {"block_m": block_m, "block_n": block_n, "block_k": block_k}
    blocks = Blocks(**{k: defaults[k] if v is None else v for k, v in given.items()})
    for key, value in blocks._asdict().items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
    return blocks, None if tuned is None else tuned.source


# --- sharding: one kernel per shard ------------------------------------------------


def _per_shard(
    local: Callable[..., jax.Array], a: jax.Array, b: jax.Array, bias: jax.Array
) -> jax.Array:
    """Run local on each device's block: rows of a and columns of b may be
    sharded (no communication: each output tile needs only its row of a and its
    column of b); the contracted k axis must be whole. shard_map's transpose
    sums db over the row shards, da over the column shards."""
    a_spec, b_spec, bias_spec = (
        tuple(jax.typeof(x).sharding.spec) + (None, None) for x in (a, b, bias)
    )
    rows, cols = a_spec[0], b_spec[1]
    if a_spec[1] is not None or b_spec[0] is not None:
        raise ValueError(
            f"the contracted axis k is sharded (a {P(*a_spec[:2])}, b {P(*b_spec[:2])}): the "
            "kernel needs it whole on each device; jax.sharding.reshard it first"
        )
    if bias_spec[0] != cols:
        raise ValueError(
            f"bias is sharded {P(bias_spec[0])} but b's columns {P(cols)}: reshard bias to match"
        )
    if set(composition.mesh_axes(rows)) & set(composition.mesh_axes(cols)):
        raise ValueError(
            f"a's rows ({P(rows)}) and b's columns ({P(cols)}) are sharded over the same mesh "
            "axis, which the output cannot be: jax.sharding.reshard one of them"
        )
    in_specs = (P(rows, None), P(None, cols), P(cols))
    return composition.per_shard(local, in_specs, P(rows, cols), a, b, bias)


def _check_all_blocks(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: backend.Interpret
) -> None:
    """Validate every kernel call this op will make, forward and backward,
    by tracing them abstractly: a bad block size fails here, not in lowering.
    With the calls' own interpret: a native kernel has limits (registers,
    shared memory) the interpreter does not."""
    sizes = {**blocks._asdict(), "interpret": interpret}
{%- if cookiecutter.backward == "kernel" %}

    def calls(a: jax.Array, b: jax.Array, bias: jax.Array, dz: jax.Array) -> None:
        kernel.matmul(a, b, bias, **sizes, activation="gelu")
        kernel.matmul(dz, b, None, **sizes, activation=None, transpose_b=True)
        kernel.matmul(a, dz, None, **sizes, activation=None, transpose_a=True)

    # The backward's dz does not exist yet: eval_shape makes it, like the
    # operands, an abstract array of the output's shape and dtype.
    dz = jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)
    jax.eval_shape(calls, a, b, bias, dz)
{%- else %}
    jax.eval_shape(lambda: kernel.matmul(a, b, bias, **sizes, activation="gelu"))
{%- endif %}


@partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _differentiable(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: backend.Interpret
) -> jax.Array:
    sizes = blocks._asdict()
    forward = partial(kernel.matmul, **sizes, activation="gelu", interpret=interpret)
    y: jax.Array = composition.batches_per_shard(forward)(a, b, bias)
    return y


{% if cookiecutter.backward == "kernel" -%}
# The residuals: the operands and the float32 pre-activation z.
Residuals: TypeAlias = tuple[jax.Array, jax.Array, jax.Array, jax.Array]


def _fwd(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: backend.Interpret
) -> tuple[jax.Array, Residuals]:
    forward = partial(
        kernel.matmul,
        **blocks._asdict(),
        activation="gelu",
        return_preactivation=True,
        interpret=interpret,
    )
    y, z = composition.kernel_call(forward, _output_and_preactivation)(a, b, bias)
    return y, (a, b, bias, z)


def _output_and_preactivation(
    a: jax.Array, b: jax.Array, bias: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The forward kernel's twin: gelu(z) in a's dtype, and z in float32."""
    z = _dot(a, b) + bias.astype(jnp.float32)
    return jax.nn.gelu(z, approximate=True).astype(a.dtype), z


def _dot(x: jax.Array, y: jax.Array) -> jax.Array:
    """x @ y summed in float32, as the kernel sums it, in plain JAX."""
    highest = jax.lax.Precision.HIGHEST
    return jnp.dot(x, y, precision=highest, preferred_element_type=jnp.float32)


# GELU's tanh form, as jax.nn.gelu(approximate=True) computes it:
# gelu(z) = z/2 * (1 + tanh(u)) = z * sigmoid(2u), u = sqrt(2/pi) * (z + 0.044715 z^3).
_SQRT_2_OVER_PI = (2 / jnp.pi) ** 0.5
_CUBIC = 0.044715


def _gelu_slope(z: jax.Array) -> jax.Array:
    """d gelu(z) / dz = sigmoid(2u) + 2 z u' sigmoid(2u) sigmoid(-2u), from
    e = exp(-2|u|), without the 1 - tanh(u)^2 that JAX's autodiff of gelu
    computes. Where |z| >~ 4 that difference cancels to nothing but tanh's
    last-ulp error (XLA's float32 tanh is up to ~3e-7 off near 1, and the
    error depends on how XLA fuses it), and z u' multiplies it up to ~30-fold:
    tens of float32 ulps of the largest cotangent. e / (1 + e)^2 keeps its
    relative accuracy there."""
    u = _SQRT_2_OVER_PI * (z + _CUBIC * z**3)
    e = jnp.exp(-2 * jnp.abs(u))  # in [0, 1]: no overflow
    sigmoid = jnp.where(u >= 0, 1, e) / (1 + e)  # sigmoid(2u) = (1 + tanh(u)) / 2
    du = _SQRT_2_OVER_PI * (1 + 3 * _CUBIC * z**2)
    # e == 0 where z is so large that du may be infinite: the term is 0, not nan.
    bell = jnp.where(e > 0, 2 * z * du * e / (1 + e) ** 2, 0)
    slope: jax.Array = sigmoid + bell
    return slope


def _bwd(
    blocks: Blocks, interpret: backend.Interpret, residuals: Residuals, g: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    a, b, bias, z = residuals
    dz = g.astype(jnp.float32) * _gelu_slope(z)
    dz_in = dz.astype(a.dtype)  # feed the MXU / tensor cores in the input dtype
    sizes = blocks._asdict()
    matmul = partial(kernel.matmul, bias=None, **sizes, activation=None, interpret=interpret)
    # Each product's twin (composition.kernel_call): the same in plain JAX, in the kernel's dtype.
    da = composition.kernel_call(
        partial(matmul, transpose_b=True), lambda dz, b: _dot(dz, b.T).astype(dz.dtype)
    )(dz_in, b)
    db = composition.kernel_call(
        partial(matmul, transpose_a=True), lambda a, dz: _dot(a.T, dz).astype(a.dtype)
    )(a, dz_in)
    return da, db, jnp.sum(dz, axis=0).astype(bias.dtype)
{%- else -%}
# The residuals: the operands, for the reference's VJP.
Residuals: TypeAlias = tuple[jax.Array, jax.Array, jax.Array]


def _fwd(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: backend.Interpret
) -> tuple[jax.Array, Residuals]:
    forward = partial(kernel.matmul, **blocks._asdict(), activation="gelu", interpret=interpret)
    y = composition.kernel_call(forward, {{ cookiecutter.op_name }}_reference)(a, b, bias)
    return y, (a, b, bias)


def _bwd(
    blocks: Blocks, interpret: backend.Interpret, residuals: Residuals, g: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    # The reference's VJP: XLA recomputes the pre-activation and runs its own
    # matmuls. Same maths as the kernel, so the gradients agree.
    _, reference_vjp = jax.vjp({{ cookiecutter.op_name }}_reference, *residuals)
    grads: tuple[jax.Array, jax.Array, jax.Array] = reference_vjp(g)
    return grads
{%- endif %}


_differentiable.defvjp(_fwd, _bwd)
