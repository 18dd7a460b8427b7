"""Oracles for flash attention, written the obvious way: the full score matrix in memory.

1. `attention_reference`: plain JAX (float32 softmax), differentiable by ordinary autodiff.
   This is what the kernels are compared with, and what `bench.py` times on TPU.
2. `numpy_attention` / `numpy_attention_grads`: float64 NumPy with hand-written gradients,
   independent of JAX. They check oracle 1.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.lax import Precision

HIGHEST = Precision.HIGHEST

__all__ = ["attention_reference", "numpy_attention", "numpy_attention_grads"]


def _scale(head_dim, scale):
    return 1.0 / math.sqrt(head_dim) if scale is None else scale


def attention_reference(q, k, v, *, causal=False, scale=None):
    """softmax(q k^T * scale [+ causal mask]) v over the last two dims; computes in float32
    (or float64 for float64 inputs) and returns q's dtype."""
    compute = jnp.promote_types(q.dtype, jnp.float32)
    qf, kf, vf = (x.astype(compute) for x in (q, k, v))
    # HIGHEST: float32 matmuls in float32 also on a TPU, whose default is one bfloat16 pass.
    # (Autodiff keeps the precision in the gradient's matmuls.)
    s = jnp.einsum("...qd,...kd->...qk", qf, kf, precision=HIGHEST) * _scale(q.shape[-1], scale)
    if causal:
        lq, lk = s.shape[-2:]
        s = jnp.where(jnp.tril(jnp.ones((lq, lk), bool)), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("...qk,...kd->...qd", p, vf, precision=HIGHEST).astype(q.dtype)


def _probabilities64(q, k, causal, scale):
    s = np.einsum("...qd,...kd->...qk", q, k) * _scale(q.shape[-1], scale)
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.tril(np.ones((lq, lk), bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _as64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def numpy_attention(q, k, v, *, causal=False, scale=None):
    """float64 attention output."""
    q, k, v = _as64(q, k, v)
    return _probabilities64(q, k, causal, scale) @ v


def numpy_attention_grads(q, k, v, do, *, causal=False, scale=None):
    """float64 (dq, dk, dv) of sum(do * attention(q, k, v)).

    With P = softmax(S), S = q k^T * scale, O = P v:
    dV = P^T dO, dP = dO v^T, dS = P * (dP - rowsum(dP * P)), dq = dS k * scale,
    dk = dS^T q * scale. (Masked entries have P = 0, hence dS = 0.)
    """
    q, k, v, do = _as64(q, k, v, do)
    scale = _scale(q.shape[-1], scale)
    p = _probabilities64(q, k, causal, None if scale is None else scale)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    return dq, dk, dv
