"""The declaration of the op: its signature, its float64 oracle and its
tolerances, from which tests/conformance/ builds every cell
(tests/test_conformance.py) and the README's support table."""

import numpy as np

from adapted_periodic import periodic_matvec, periodic_matvec_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

# Each entry of the product and of each gradient is at most three products
# and two additions, whose terms may cancel: a few ulps of the array's
# largest entry, not of each entry.
VALUES = Ulps(at_value=0, at_scale=3)
GRADIENTS = Ulps(at_value=0, at_scale=3)


def periodic_matvec_f64(dl, d, du, x):
    """The product in float64 NumPy, with np.roll for the wrap-around."""
    dl, d, du, x = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x))
    return dl * np.roll(x, 1, axis=-1) + d * x + du * np.roll(x, -1, axis=-1)


# The primitive works along the last axis, n: sharding it would split a row's
# neighbours between devices, so the abstract evaluation refuses it.
SHARDED_ROW = Refuse(
    TypeError,
    r"periodic_matvec: the last axis .* is sharded",
    "refused: the last axis couples neighbours; shard the batch axis, or reshard first",
)

# Each roll trades one boundary element with each neighbour.
HALO = Collectives(
    "a halo exchange (collective-permute) of one element per shard boundary",
    forward={"collective-permute": 2},
    gradient={"collective-permute": 6},
)

# Three products of two arguments, summed, must stay finite in float32.
FINITE_PRODUCTS = (-1e18, 1e18)

SPEC = OpSpec(
    name="periodic_matvec",
    op=periodic_matvec,
    reference=periodic_matvec_reference,
    oracle=periodic_matvec_f64,
    args=(
        Arg("dl", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("d", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("du", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("x", ("b", "n"), domain=FINITE_PRODUCTS),
    ),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 12},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    platforms={"cpu": "", "cuda": "", "tpu": ""},
    extra_collectives={
        "jit-auto-n": HALO,
        # The same with n split over the automatic axis a shard_map leaves free.
        "shard-map-partial-b-free-n": HALO,
    },
    refuse={
        "jit-explicit-n": SHARDED_ROW,
        "jit-explicit-set-mesh-n": SHARDED_ROW,
        "grad-grad-explicit-n": SHARDED_ROW,
        "grad-grad-explicit-vmap-n": SHARDED_ROW,
    },
)
