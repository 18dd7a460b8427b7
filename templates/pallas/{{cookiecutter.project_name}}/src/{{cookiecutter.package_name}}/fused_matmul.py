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
"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from . import kernel
{%- if cookiecutter.backward == "reference" %}
from .reference import fused_matmul_reference
{%- endif %}

DTYPES = (jnp.float32, jnp.bfloat16)
BACKWARD = "{{ cookiecutter.backward }}"  # "kernel": Pallas backward; "reference": XLA's


class Blocks(NamedTuple):
    """Block sizes, as kernel.matmul takes them (**blocks._asdict()). A tuple,
    so hashable, as the custom VJP's non-differentiable arguments must be."""

    block_m: int
    block_n: int
    block_k: int


def fused_matmul(
    a: ArrayLike,
    b: ArrayLike,
    bias: ArrayLike,
    *,
    block_m: int | None = None,
    block_n: int | None = None,
    block_k: int | None = None,
    interpret: kernel.Interpret = None,
) -> jax.Array:
    """gelu(a (m, k) @ b (k, n) + bias (n,)), in the dtype of a.

    Block sizes default to kernel.DEFAULT_BLOCKS and are checked against the
    target's tiling rules before anything is lowered. interpret=None runs the
    kernel natively on its target and interpreted elsewhere; pass
    pltpu.InterpretParams / True / False to choose.
    """
    a, b, bias = jnp.asarray(a), jnp.asarray(b), jnp.asarray(bias)
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
    given = {"block_m": block_m, "block_n": block_n, "block_k": block_k}
    blocks = Blocks(**{k: kernel.DEFAULT_BLOCKS[k] if v is None else v for k, v in given.items()})
    for key, value in blocks._asdict().items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
    _check_all_blocks(a, b, bias, blocks)
    return _fused_matmul(a, b, bias, blocks, interpret)


def _check_all_blocks(a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks) -> None:
    """Validate every kernel call this op will make, forward and backward,
    by tracing them abstractly: a bad block size fails here, not in lowering."""
    sizes = blocks._asdict()
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
def _fused_matmul(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: kernel.Interpret
) -> jax.Array:
    return kernel.matmul(a, b, bias, **blocks._asdict(), activation="gelu", interpret=interpret)


{% if cookiecutter.backward == "kernel" -%}
# The residuals: the operands and the float32 pre-activation z.
type Residuals = tuple[jax.Array, jax.Array, jax.Array, jax.Array]


def _fwd(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: kernel.Interpret
) -> tuple[jax.Array, Residuals]:
    y, z = kernel.matmul(
        a,
        b,
        bias,
        **blocks._asdict(),
        activation="gelu",
        return_preactivation=True,
        interpret=interpret,
    )
    return y, (a, b, bias, z)


def _bwd(
    blocks: Blocks, interpret: kernel.Interpret, residuals: Residuals, g: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    a, b, bias, z = residuals
    # GELU's derivative at the saved pre-activation, by JAX's own autodiff.
    _, gelu_vjp = jax.vjp(lambda z: jax.nn.gelu(z, approximate=True), z)
    (dz,) = gelu_vjp(g.astype(jnp.float32))
    dz_in = dz.astype(a.dtype)  # feed the MXU / tensor cores in the input dtype
    sizes = blocks._asdict()
    da = kernel.matmul(
        dz_in, b, None, **sizes, activation=None, transpose_b=True, interpret=interpret
    )
    db = kernel.matmul(
        a, dz_in, None, **sizes, activation=None, transpose_a=True, interpret=interpret
    )
    return da, db, jnp.sum(dz, axis=0).astype(bias.dtype)
{%- else -%}
# The residuals: the operands, for the reference's VJP.
type Residuals = tuple[jax.Array, jax.Array, jax.Array]


def _fwd(
    a: jax.Array, b: jax.Array, bias: jax.Array, blocks: Blocks, interpret: kernel.Interpret
) -> tuple[jax.Array, Residuals]:
    y = kernel.matmul(a, b, bias, **blocks._asdict(), activation="gelu", interpret=interpret)
    return y, (a, b, bias)


def _bwd(
    blocks: Blocks, interpret: kernel.Interpret, residuals: Residuals, g: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    # The reference's VJP: XLA recomputes the pre-activation and runs its own
    # matmuls. Same maths as the kernel, so the gradients agree.
    _, reference_vjp = jax.vjp(fused_matmul_reference, *residuals)
    grads: tuple[jax.Array, jax.Array, jax.Array] = reference_vjp(g)
    return grads
{%- endif %}


_fused_matmul.defvjp(_fwd, _bwd)
