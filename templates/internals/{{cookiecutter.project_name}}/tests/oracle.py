"""Independent float64 NumPy oracle."""

import numpy as np

from compare import Ulps

# How far the op may be from these oracles, in ulps (tests/compare.py). Each
# entry of the product, and of each gradient (the transposed band), is at most
# three products and two additions, whose terms may cancel: a rounding of
# about half an ulp of the largest term at each step, so a few ulps of the
# array's largest entry, not of each entry. Measured at most 1.2 (float32); 3.
VALUES = Ulps(at_value=0, at_scale=3)
GRADIENTS = Ulps(at_value=0, at_scale=3)
# Gradients of a nonlinear loss of the product (sin, tanh): the product's own
# rounding moves the cotangent cos(y) too, by up to the largest |y| times its
# ulp. Measured at most 7.3 ulps of the largest entry (float64); 16.
THROUGH_A_LOSS = Ulps(at_value=0, at_scale=16)


def shape_id(shape) -> str:
    return "x".join(map(str, shape))


def tridiagonal_matvec_f64(dl, d, du, x):
    """The product in float64 NumPy, row by row of the band: an oracle that
    shares no code, and no dtype, with the op or the reference."""
    dl, d, du, x = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x))
    y = d * x
    y[..., 1:] += dl[..., 1:] * x[..., :-1]
    y[..., :-1] += du[..., :-1] * x[..., 1:]
    return y


def tridiagonal_matvec_vjp_f64(dl, d, du, x, cotangent):
    """Gradients of sum(cotangent * y) with respect to (dl, d, du, x)."""
    dl, d, du, x, ct = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x, cotangent))
    g_dl, g_du = np.zeros_like(ct), np.zeros_like(ct)
    g_dl[..., 1:] = ct[..., 1:] * x[..., :-1]
    g_du[..., :-1] = ct[..., :-1] * x[..., 1:]
    g_x = d * ct
    g_x[..., :-1] += dl[..., 1:] * ct[..., 1:]
    g_x[..., 1:] += du[..., :-1] * ct[..., :-1]
    return g_dl, ct * x, g_du, g_x
