"""Independent float64 NumPy top-k."""

import numpy as np

from compare import Ulps

# How far the op may be from these oracles, in ulps (tests/compare.py).
{%- if cookiecutter.normalize == "softmax" %}
# A probability exp(x - logsumexp(x)) carries logsumexp's rounding, an ulp of
# a number as large as |x - logsumexp|, into its exponent: a relative error of
# that many ulps. Measured at most 16 ulps (sharded, float32 and float64); 32.
VALUES = Ulps(at_value=32)
# Its gradient subtracts p * sum(g * p) from the scattered cotangents: terms
# that cancel, so the rounding is on the scale of the largest entry. Measured
# at most 8 ulps of the largest entry (sharded, float32); 16.
GRADIENTS = Ulps(at_value=0, at_scale=16)
{%- else %}
# Top-k selects: its values are copies of inputs, and its gradient puts each
# cotangent where its value came from. Nothing is rounded, so nothing may
# differ.
VALUES = Ulps(0)
GRADIENTS = Ulps(0)
{%- endif %}


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


SOFTMAX = {{ "True" if cookiecutter.normalize == "softmax" else "False" }}


def top_k_f64(x, k):
    """Values and indices of the k largest entries per row, in float64.

    Ordered as lax.top_k orders them: by value, +0 above -0 (XLA sorts
    floats in their total order), and equal values in index order (lexsort
    is stable).
    """
    x = np.asarray(x, np.float64)
    indices = np.lexsort((np.signbit(x), -x), axis=-1)[:, :k]
    values = np.take_along_axis(x, indices, axis=1)
    if SOFTMAX:
        row_max = x.max(axis=1, keepdims=True)
        lse = row_max + np.log(np.exp(x - row_max).sum(axis=1, keepdims=True))
        values = np.exp(values - lse)
    return values, indices


def quantized_with_ties(rng, shape, dtype="float32"):
    """Inputs full of ties, within every shard and across all of them.

    Every entry is 0, 1 or 2, so a row's largest value occurs in every shard
    and the top k is decided by the lower-index rule alone. Every other row
    also holds a 3 at both sides of an item-shard boundary for 2, 4 and 8
    equal shards: up to six tied winners, each pair split between two shards.
    """
    x = rng.integers(0, 3, shape).astype(dtype)
    items = shape[1]
    for row in x[::2]:
        for shards in (2, 4, 8):
            boundary = items // shards * rng.integers(1, shards)
            row[boundary - 1 : boundary + 1] = 3
    return x


def top_k_vjp_f64(x, k, cotangent):
    """Gradient of sum(cotangent * values) with respect to x."""
    x = np.asarray(x, np.float64)
    values, indices = top_k_f64(x, k)
    cotangent = np.asarray(cotangent, np.float64)
    grad = np.zeros_like(x)
    rows = np.arange(x.shape[0])[:, None]
    if not SOFTMAX:
        np.add.at(grad, (rows, indices), cotangent)
        return grad
    # values_j = p[i_j]; d p_a / d x_b = p_a (delta_ab - p_b)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    weighted = cotangent * values
    np.add.at(grad, (rows, indices), weighted)
    return grad - p * weighted.sum(axis=1, keepdims=True)
