"""Independent float64 NumPy oracle."""

import numpy as np

from compare import Ulps

# How far the op may be from these oracles, in ulps (tests/compare.py).
# bfloat16 is computed in float32 and rounded once: that half ulp is allowed
# on top (compare.py), and the counts below are float32's.
#
# y = x * r, with r from a sum of squares accumulated in double and rounded
# once: about 1.5 ulps from the oracle, and as much again where the tests
# compare the op with the reference (measured at most 3 in float32, 4 in
# float64); 6.
VALUES = Ulps(at_value=6)
# dx = r * g - r**3 * mean(g * x) * x: two terms that cancel, so the rounding
# is on the scale of the largest entry, not of each. Measured at most 2 ulps
# of the largest entry; 4.
GRADIENTS = Ulps(at_value=0, at_scale=4)


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


def rms_norm_f64(x, eps=1e-6):
    """x / sqrt(mean(x**2) + eps) over the last axis, in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rms_norm_vjp_f64(x, cotangent, eps=1e-6):
    """Gradient of sum(cotangent * rms_norm(x)) with respect to x, in float64.

    With r = 1 / sqrt(mean(x**2) + eps) per row and n the row length:
    dx = r * g - r**3 * mean(g * x) * x.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(cotangent, dtype=np.float64)
    r = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return r * g - r**3 * np.mean(g * x, axis=-1, keepdims=True) * x
