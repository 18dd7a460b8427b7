"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py)."""

from functools import partial

from adapted_softmax import softmax, softmax_partitioned, softmax_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

# Softmax of a row of 16: each output is exp(x_i - max) / sum, a few float32
# roundings (exp, the sum of 16 terms, the division) at the output's value
# and a few more on the row's scale; 8 and 8.
VALUES = Ulps(at_value=8, at_scale=8)
# dx = y * (g - sum(g * y)): a sum of 16 products whose terms cancel, on the
# scale of the largest; 16.
GRADIENTS = Ulps(at_value=8, at_scale=16)

# Each row must be whole on one device (the max and the sum run along it).
SHARDED_ROW = Refuse(
    ValueError,
    r"the row axis n is sharded",
    "refused: the kernel needs each row whole; jax.sharding.reshard it first",
)
# pallas_call has no autodiff rule: the op is a jax.custom_vjp, reverse mode only.
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: a custom_vjp is reverse mode only; jax.jvp the reference",
)
# The kernel has no derivatives of its own: the custom VJP is first order.
# Differentiating its backward again asks JAX for pallas_call's JVP, which
# fails while linearizing.
FIRST_ORDER_ONLY = Refuse(
    ValueError,
    r"Linearization failed to produce known values",
    "refused: the custom VJP is first order; differentiate the reference for second order",
)
# Inside a shard_map manual over "x", rows split over its free Explicit axis
# "y": refused by the template's per_shard (src/.../composition.py).
PARTLY_MANUAL_EXPLICIT = Refuse(
    NotImplementedError,
    r"inside a jax\.shard_map manual over",
    "refused: operands split over the Explicit axes a shard_map leaves free;"
    " make it manual over them too, or reshard them whole first",
)
# The forward gathers x along n (the reference all-reduces its row maxima and
# sums); the gradient communicates as the reference's does.
ROWS_GATHERED = Collectives(
    "n is gathered: each row whole on one device",
    forward={"all-gather": 1},
    gradient={"all-reduce": 3},
)
# The kernel takes float32 and bfloat16; finite differences need float64.
FLOAT64 = Refuse(
    TypeError,
    r"must be float32 or bfloat16",
    "refused: no float64 kernel; the gradient cells check against the float64 oracle",
)

SPEC = OpSpec(
    name="softmax",
    op=partial(softmax, implementation="kernel"),
    auto_op=partial(softmax_partitioned, implementation="kernel"),
    reference=softmax_reference,
    oracle=None,  # the reference, run in float64
    args=(Arg("x", ("m", "n")),),
    outputs=(("m", "n"),),
    sizes={"m": 16, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    shard_map_axes=("m",),
    symbolic_axis="m",
    platforms={"cpu": "", "tpu": r"tpu_custom_call"},
    extra_collectives={
        "jit-auto-n": ROWS_GATHERED,
        # The same with n split over the automatic axis a shard_map leaves free.
        "shard-map-partial-m-free-n": ROWS_GATHERED,
    },
    refuse={
        "jit-explicit-n": SHARDED_ROW,
        "jit-explicit-set-mesh-n": SHARDED_ROW,
        "grad-grad-explicit-n": SHARDED_ROW,
        "grad-grad-explicit-m": FIRST_ORDER_ONLY,
        "grad-grad-explicit-vmap-n": SHARDED_ROW,
        "grad-grad-explicit-vmap-m": FIRST_ORDER_ONLY,
        "grad-grad-explicit-vmap-new-axis": FIRST_ORDER_ONLY,
        "shard-map-partial-explicit-m": PARTLY_MANUAL_EXPLICIT,
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        "check-grads-*": FLOAT64,
        "size-*-0": Refuse(
            ValueError,
            r"empty operand",
            "refused: no grid of blocks over an empty axis; skip the call",
        ),
    },
)
