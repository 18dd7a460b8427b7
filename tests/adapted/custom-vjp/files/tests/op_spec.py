"""The declaration of softplus's signature, from which tests/conformance/
builds every cell, and the README's support table, tests/test_reference.py and
benchmarks/bench.py work."""

import numpy as np

from adapted_softplus import softplus, softplus_reference

from compare import Ulps
from conformance import OpSpec, Refuse

# A custom_vjp function has a reverse rule only: JAX refuses forward mode.
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused by JAX: custom_vjp has no forward rule; generate with rule=jvp for forward mode",
)

# exp, log1p and an add, each correctly rounded to half an ulp or so, and
# log1p's result is at least log(2)/2 of exp's: measured at most 2 ulps
# (float32, standard normal inputs); 4.
VALUES = Ulps(at_value=4)
# sigmoid, 1 / (1 + exp(-x)), times the cotangent: three roundings; 4.
GRADIENTS = Ulps(at_value=4)
# The second derivative, autodiff of the rule's sigmoid: s * (1 - s), where
# 1 - s keeps an ulp of 1, not of itself, as s nears 1: on the scale of the
# largest entry (measured at most 1.7 ulps of it, 30 draws); 4.
SECOND_ORDER = Ulps(at_value=4, at_scale=4)


def softplus_f64(x):
    return np.logaddexp(0.0, np.asarray(x, dtype=np.float64))


def softplus_vjp_f64(x, cotangent):
    """The derivative, the logistic sigmoid, times the cotangent, in float64.
    Declared because the reference's autodiff goes through exp(x), which
    overflows for the hard cells' huge x (NaN), where the rule is finite."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        sigmoid = np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))
    return (np.asarray(cotangent, np.float64) * sigmoid,)


# --quick takes the first size; a full run (and its plot) the rest.
BENCH_SIZES = [
    {"n": 256, "k": 256},
    {"n": 1024, "k": 1024},
    {"n": 2048, "k": 1024},
    {"n": 4096, "k": 1024},
]

SPEC = OpSpec(
    name="softplus",
    op=softplus,
    reference=softplus_reference,
    oracle=softplus_f64,
    gradient_oracle=softplus_vjp_f64,
    signature="x[n,k] -> [n,k]",
    sizes={"n": 8, "k": 4},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    second_order_tolerance=SECOND_ORDER,
    # Elementwise: each shard of x gives that shard of the output.
    shard_map_axes=("n", "k"),
    symbolic_axis="n",
    platforms={"cpu": "", "cuda": "", "tpu": ""},
    refuse={"jvp": FORWARD_MODE, "linearize": FORWARD_MODE},
)
