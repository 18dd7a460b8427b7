"""The declaration of softmax, the op of this project: row-wise over the
last axis, no attributes, the row maximum as its residual; reverse mode
only (a custom_vjp)."""

import numpy as np
from jax import export

from adapted_softmax import FORWARD, TARGETS, softmax, softmax_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

# How far the op may be from the oracle, in ulps (tests/compare.py).
# bfloat16 is computed in float32 and rounded once: that half ulp is allowed
# on top (compare.py), and the counts below are float32's.
#
# y = exp(x - m) / s: the exponential of a float32 difference and a product
# by 1/s rounded once, a few ulps from the oracle, and as much again where the
# tests compare the op with the reference; 8.
VALUES = Ulps(at_value=8)
# dx = y * (g - sum(g * y)), y recomputed from the row maximum: the terms
# cancel, so the rounding is on the scale of the largest entry; 8.
GRADIENTS = Ulps(at_value=0, at_scale=8)
# Hessian-vector products (tests/test_handlers.py): the second derivative's
# terms are of the size of y and its gradient, its entries far smaller (they
# cancel), so the rounding is on the terms' scale: measured 152 ulps of the
# largest entry in float64; 256.
HESSIANS = Ulps(at_value=0, at_scale=256)


def softmax_f64(x):
    """The independent float64 NumPy oracle: exp(x - max) / sum(exp(x - max)) per row."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


ORACLE = softmax_f64

SPEC = OpSpec(
    name="softmax",
    op=softmax,
    reference=softmax_reference,
    oracle=ORACLE,
    args=(Arg("x", ("b", "n")),),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Every leading axis is a batch of rows; n, the row, is reduced over.
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    # The module holds a custom call to the forward handler on every platform
    # this project has a handler for; XLA looks the handler up when it compiles.
    platforms={"cpu": rf"custom_call @{FORWARD}\b"},
    export_checks=tuple(export.DisabledSafetyCheck.custom_call(t) for t in TARGETS),
    # A split row is gathered whole, x and, for the gradient, its cotangent
    # (the reference all-reduces its row maxima and sums instead). Rows split
    # along b need no communication.
    extra_collectives={
        **{
            f"jit-{mode}-n": Collectives(
                "the split rows are gathered whole",
                forward={"all-gather": 1},
                gradient={"all-gather": 2},
            )
            for mode in ("auto", "explicit", "explicit-set-mesh")
        },
        # Split over the automatic axis a shard_map leaves free, x is gathered
        # for the forward call and again for the backward one.
        "shard-map-partial-b-free-n": Collectives(
            "the split rows are gathered whole (x twice in the gradient)",
            forward={"all-gather": 1},
            gradient={"all-gather": 3},
        ),
    },
    # The ffi_call has no forward-mode rule: jax.custom_vjp pairs the forward
    # handler with the backward one, and JAX refuses jvp of a custom_vjp.
    refuse={
        **{
            name: Refuse(
                TypeError,
                r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
                "refused: forward mode of a custom_vjp; use jax.grad or jax.vjp "
                "(jax.hessian, forward over reverse, works)",
            )
            for name in ("jvp", "linearize")
        },
        "size-n-0": Refuse(
            ValueError,
            r"has rows of length 0",
            "refused: a row of no elements has no softmax; skip the call",
        ),
    },
)
