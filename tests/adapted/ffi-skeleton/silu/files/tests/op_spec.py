"""The declaration of silu, the op of this project: element-wise, no
attributes and no residual, so every axis is batch-like and a split one
stays split; reverse mode only (a custom_vjp)."""

import numpy as np
from jax import export

from adapted_silu import FORWARD, TARGETS, silu, silu_reference

from compare import Ulps
from conformance import Arg, OpSpec, Refuse

# How far the op may be from the oracle, in ulps (tests/compare.py).
# bfloat16 is computed in float32 and rounded once: that half ulp is allowed
# on top (compare.py), and the counts below are float32's.
#
# y = x * s: an exponential, a division and a product, each rounded, a few
# ulps from the oracle, and as much again where the tests compare the op with
# the reference; 8.
VALUES = Ulps(at_value=8)
# dx = g * s * (1 + x * (1 - s)): 1 + x * (1 - s) cancels near x = -1.28, so
# the rounding is on the scale of the largest entry there; 8.
GRADIENTS = Ulps(at_value=8, at_scale=8)


def silu_f64(x):
    """The independent float64 NumPy oracle: x * sigmoid(x), with
    sigmoid(x) = exp(-log(1 + exp(-x))) (no overflow, no cancellation)."""
    x = np.asarray(x, dtype=np.float64)
    return x * np.exp(-np.logaddexp(0, -x))


ORACLE = silu_f64

SPEC = OpSpec(
    name="silu",
    op=silu,
    reference=silu_reference,
    oracle=ORACLE,
    args=(Arg("x", ("b", "n")),),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Element-wise: every axis is batch-like, the last one included (the
    # handlers reduce over none: rowwise.REDUCED is empty), so a split axis
    # stays split under jit too, with no communication.
    batch_axes=("b", "n"),
    shard_map_axes=("b", "n"),
    symbolic_axis="b",
    # The module holds a custom call to the forward handler on every platform
    # this project has a handler for; XLA looks the handler up when it compiles.
    platforms={"cpu": rf"custom_call @{FORWARD}\b"},
    export_checks=tuple(export.DisabledSafetyCheck.custom_call(t) for t in TARGETS),
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
        # rowwise.py refuses an empty row before any handler sees it.
        "size-n-0": Refuse(
            ValueError,
            r"has rows of length 0",
            "refused: the handlers take rows of one element or more; skip the call",
        ),
    },
)
