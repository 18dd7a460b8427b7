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

import jax
import jax.numpy as jnp

from . import kernel
{%- if cookiecutter.backward == "reference" %}
from .reference import fused_matmul_reference
{%- endif %}

DTYPES = (jnp.float32, jnp.bfloat16)
BACKWARD = "{{ cookiecutter.backward }}"  # "kernel": Pallas backward; "reference": XLA's


def fused_matmul(a, b, bias, *, block_m=None, block_n=None, block_k=None, interpret=None):
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
    blocks = {key: kernel.DEFAULT_BLOCKS[key] if v is None else v for key, v in given.items()}
    for key, value in blocks.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
    _check_all_blocks(a, b, bias, blocks)
    return _fused_matmul(a, b, bias, tuple(blocks.items()), interpret)


def _check_all_blocks(a, b, bias, blocks):
    """Validate every kernel call this op will make, forward and backward,
    by tracing them abstractly: a bad block size fails here, not in lowering."""
    calls = [lambda: kernel.matmul(a, b, bias, **blocks, activation="gelu")]
{%- if cookiecutter.backward == "kernel" %}
    z = jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)
    calls += [
        lambda: kernel.matmul(z, b, None, **blocks, activation=None, transpose_b=True),
        lambda: kernel.matmul(a, z, None, **blocks, activation=None, transpose_a=True),
    ]
{%- endif %}
    for call in calls:
        jax.eval_shape(call)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _fused_matmul(a, b, bias, blocks, interpret):
    return kernel.matmul(a, b, bias, **dict(blocks), activation="gelu", interpret=interpret)


{% if cookiecutter.backward == "kernel" -%}
def _fwd(a, b, bias, blocks, interpret):
    blocks = dict(blocks)
    y, z = kernel.matmul(
        a, b, bias, **blocks, activation="gelu", return_preactivation=True, interpret=interpret
    )
    return y, (a, b, bias, z)


def _bwd(blocks, interpret, residuals, g):
    a, b, bias, z = residuals
    # GELU's derivative at the saved pre-activation, by JAX's own autodiff.
    _, gelu_vjp = jax.vjp(lambda z: jax.nn.gelu(z, approximate=True), z)
    (dz,) = gelu_vjp(g.astype(jnp.float32))
    dz_in = dz.astype(a.dtype)  # feed the MXU / tensor cores in the input dtype
    blocks = dict(blocks)
    da = kernel.matmul(
        dz_in, b, None, **blocks, activation=None, transpose_b=True, interpret=interpret
    )
    db = kernel.matmul(
        a, dz_in, None, **blocks, activation=None, transpose_a=True, interpret=interpret
    )
    return da, db, jnp.sum(dz, axis=0).astype(bias.dtype)
{%- else -%}
def _fwd(a, b, bias, blocks, interpret):
    y = kernel.matmul(a, b, bias, **dict(blocks), activation="gelu", interpret=interpret)
    return y, (a, b, bias)


def _bwd(blocks, interpret, residuals, g):
    # The reference's VJP: XLA recomputes the pre-activation and runs its own
    # matmuls. Same maths as the kernel, so the gradients agree.
    _, reference_vjp = jax.vjp(fused_matmul_reference, *residuals)
    return reference_vjp(g)
{%- endif %}


_fused_matmul.defvjp(_fwd, _bwd)
