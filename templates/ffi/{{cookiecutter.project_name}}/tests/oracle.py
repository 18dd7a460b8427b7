"""Independent float64 NumPy oracle."""

import numpy as np

from compare import Ulps

VALUES = Ulps(1e9)
GRADIENTS = Ulps(1e9)


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
