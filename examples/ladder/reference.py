"""Rung 1, plain JAX: RMS normalization over the last axis with a learned scale.

    y = x / sqrt(mean(x**2, axis=-1) + eps) * w

JAX differentiates it, batches it, shards it and exports it on its own. Written as
x / sqrt(...), not x * rsqrt(...): XLA:CPU in jaxlib 0.11.1 to 0.12.1 miscompiles
jit(grad) of the rsqrt form at >= 4096 rows (see the kit's facts file), and the tests check
this form against the float64 oracle at 4100 rows.
"""

import jax.numpy as jnp

EPS = 1e-6


def rms_norm(x, w, eps=EPS):
    """x: (..., d) float32, w: (d,) float32 -> (..., d)."""
    rms = jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return x / rms * w
