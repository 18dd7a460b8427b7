"""Independent float64 NumPy oracle."""

import math

import numpy as np

from compare import Ulps

# How far the kernel may be from these oracles, in ulps (tests/compare.py).
# bfloat16 operands are multiplied with a float32 accumulator and the result
# rounded once: that half ulp is allowed on top (compare.py), and the counts
# below are float32's.
#
# gelu(a @ b + bias): each entry sums k products whose terms cancel, so the
# rounding is on the scale of the largest entry, not of each. Measured at most
# 8.1 ulps of the largest entry (float32, the reference at k = 512); 16.
VALUES = Ulps(at_value=0, at_scale=16)
# The cotangents are matmuls of the same kind through gelu's derivative, over
# the other operand's axis: measured at most 18 ulps of the largest entry
# (float32); 32.
GRADIENTS = Ulps(at_value=0, at_scale=32)
# bfloat16 operands, counted in float32's ulps (2**16 of them make one of
# bfloat16's). The kernel against the reference, both rounded to bfloat16:
# they differ by up to 0.125 of a bfloat16 ulp of the largest entry beyond the
# two roundings (measured on CPU; where the reference's float32 sums lose it
# is not established); a quarter.
BFLOAT16_VALUES = Ulps(at_value=0, at_scale=2**14)
# The backward feeds dz rounded to bfloat16 into its matmuls (the tensor
# units' input dtype): every product carries that half-ulp rounding, so the
# sums are off by a fraction of a bfloat16 ulp of the largest entry. Measured
# at most 0.4 of one; one.
BFLOAT16_GRADIENTS = Ulps(at_value=0, at_scale=2**16)


# GELU's tanh form, the one the reference uses (jax.nn.gelu(approximate=True)):
# gelu(z) = z/2 * (1 + tanh(u)), u = sqrt(2/pi) * (z + 0.044715 z^3).
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_CUBIC = 0.044715


def _f64(*arrays):
    return (np.asarray(v, np.float64) for v in arrays)


def {{ cookiecutter.op_name }}_f64(a, b, bias):
    """gelu(a @ b + bias) in float64."""
    a, b, bias = _f64(a, b, bias)
    z = a @ b + bias
    return 0.5 * z * (1 + np.tanh(_SQRT_2_OVER_PI * (z + _CUBIC * z**3)))


def {{ cookiecutter.op_name }}_vjp_f64(a, b, bias, g):
    """The cotangents (da, db, dbias) of {{ cookiecutter.op_name }} for the output cotangent g,
    derived by hand in float64: no JAX autodiff, so it can judge a backward that
    is itself JAX's autodiff of the reference."""
    a, b, bias, g = _f64(a, b, bias, g)
    z = a @ b + bias
    t = np.tanh(_SQRT_2_OVER_PI * (z + _CUBIC * z**3))
    # d gelu / dz = (1 + t)/2 + z/2 * (1 - t^2) * du/dz
    slope = 0.5 * (1 + t) + 0.5 * z * (1 - t**2) * _SQRT_2_OVER_PI * (1 + 3 * _CUBIC * z**2)
    dz = g * slope
    return dz @ b.T, a.T @ dz, dz.sum(axis=0)
