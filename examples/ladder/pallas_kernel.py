"""Rung 5, Pallas: the forward pass as a kernel over a grid of row blocks.

What it buys: control of the memory traffic. Each grid step loads a block of whole rows once,
computes the row statistic and the output from that block, and writes y and the inverse RMS
r: one read of x and one write of y, whatever XLA would fuse. On a GPU or TPU this compiles
to a kernel; on the CPU only the interpreter runs it (interpret=True), which is for testing:
its timings say nothing about a kernel's speed. Which of the two is chosen per platform the
program is lowered for (lax.platform_dependent), not by the default backend: on a machine with
one GPU, the sharding tests run this rung on simulated CPU devices, interpreted.

The backward pass is plain JAX from the saved r (a jax.custom_vjp: a pallas_call has no
autodiff rule of its own). vmap works: pallas_call's batching rule adds a grid axis.
What it costs: a kernel per target, block sizes to choose, no forward mode.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

EPS = 1e-6
# Whole rows per grid step: a multiple of 8, as TPU tiling asks; tune by timing on the target.
# Each step has a fixed cost, in the interpreter a large one: big blocks, few steps.
BLOCK_ROWS = 256


def rms_norm(x, w, block_rows=BLOCK_ROWS):
    """x: (rows, d) float32, w: (d,) float32 -> (rows, d). Reverse-mode differentiable."""
    if x.ndim != 2 or w.shape != x.shape[1:]:
        raise ValueError(f"need x (rows, d) and w (d,), got {x.shape} and {w.shape}")
    return _rms_norm(x, w, min(block_rows, x.shape[0]))


def _kernel(x_ref, w_ref, y_ref, r_ref):
    x = x_ref[...]  # (block_rows, d): whole rows, so the statistic never leaves the block
    r = 1.0 / jnp.sqrt(jnp.mean(x * x, axis=1, keepdims=True) + EPS)
    y_ref[...] = x * r * w_ref[...]
    r_ref[...] = r


def _forward(x, w, block_rows):
    rows, d = x.shape
    row_block = pl.BlockSpec((block_rows, d), lambda i: (i, 0))
    call = functools.partial(
        pl.pallas_call,
        _kernel,
        grid=(pl.cdiv(rows, block_rows),),  # a ragged last block: its extra rows are dropped
        in_specs=[row_block, pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=[row_block, pl.BlockSpec((block_rows, 1), lambda i: (i, 0))],
        out_shape=[
            jax.ShapeDtypeStruct(x.shape, x.dtype),
            jax.ShapeDtypeStruct((rows, 1), x.dtype),
        ],
    )
    return jax.lax.platform_dependent(
        x,
        w.reshape(1, d),
        cpu=call(interpret=True),
        default=call(interpret=False),  # compiled, on a GPU or TPU
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _rms_norm(x, w, block_rows):
    return _forward(x, w, block_rows)[0]


def _fwd(x, w, block_rows):
    y, r = _forward(x, w, block_rows)
    return y, (x, w, r)


def _bwd(block_rows, residuals, dy):
    x, w, r = residuals
    x_hat = x * r
    g = dy * w
    dx = r * (g - x_hat * jnp.mean(g * x_hat, axis=1, keepdims=True))
    return dx, jnp.sum(dy * x_hat, axis=0)


_rms_norm.defvjp(_fwd, _bwd)
