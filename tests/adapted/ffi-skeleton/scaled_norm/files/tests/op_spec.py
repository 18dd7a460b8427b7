"""The declaration of scaled_norm, the op of this project: row-wise over the
last axis with two attributes, eps and scale, which the cells take at their
defaults; reverse mode only (a custom_vjp)."""

import numpy as np
from jax import export

from adapted_scaled_norm import FORWARD, TARGETS, scaled_norm, scaled_norm_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

# How far the op may be from the oracle, in ulps (tests/compare.py).
# bfloat16 is computed in float32 and rounded once: that half ulp is allowed
# on top (compare.py), and the counts below are float32's.
#
# y = x * (scale * r), with r from a sum of squares accumulated in double and
# rounded once: as rms_norm, and one more rounding for the scale; 8.
VALUES = Ulps(at_value=8)
# dx = scale * (r * g - c * x): two terms that cancel, so the rounding is on
# the scale of the largest entry; 8.
GRADIENTS = Ulps(at_value=0, at_scale=8)


def scaled_norm_f64(x, eps=1e-6, scale=2.0):
    """The independent float64 NumPy oracle: scale * x / sqrt(mean(x**2) + eps) per row."""
    x = np.asarray(x, dtype=np.float64)
    return scale * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


ORACLE = scaled_norm_f64

# The handlers need whole rows (rowwise.REDUCED): a row split across devices
# is gathered first. Rows split along the batch axis need no communication.
SPLIT_ROWS = Collectives(
    "the row (n, which the handlers reduce over) is split: it is gathered whole, "
    "1 all-gather forward and 2 for the gradient (x and its cotangent), where the "
    "reference all-reduces partial row sums",
    forward={"all-gather": 1},
    gradient={"all-gather": 2},
)
# The row split over the automatic axis a shard_map manual over the batch
# leaves free: x gathered for the forward call and again for the backward one.
SPLIT_ROWS_IN_SHARD_MAP = Collectives(
    "the row (n) split over the automatic axis inside a shard_map: gathered whole, "
    "1 all-gather forward and 3 for the gradient",
    forward={"all-gather": 1},
    gradient={"all-gather": 3},
)

SPEC = OpSpec(
    name="scaled_norm",
    # eps and scale are compile-time attributes of the FFI calls, not arrays:
    # the cells use their defaults, the same in the op, the reference and the
    # oracle.
    op=scaled_norm,
    reference=scaled_norm_reference,
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
    # A row of one element: its gradient is two nearly equal terms' difference,
    # and the plain-JAX reference is 1e5 ulps off there too.
    ill_conditioned={"size-n-1": "a row of one element: its gradient cancels"},
    # Under jit the FFI calls are split by the sharding rule rowwise.py
    # derives from the handlers' axes: a split batch axis stays split, with no
    # communication; a split row is gathered.
    extra_collectives={
        "jit-auto-n": SPLIT_ROWS,
        "jit-explicit-n": SPLIT_ROWS,
        "jit-explicit-set-mesh-n": SPLIT_ROWS,
        "shard-map-partial-b-free-n": SPLIT_ROWS_IN_SHARD_MAP,
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
        # rowwise.py refuses an empty row before any handler sees it.
        "size-n-0": Refuse(
            ValueError,
            r"has rows of length 0",
            "refused: the handlers take rows of one element or more; skip the call",
        ),
    },
)
