"""The declaration of logsumexp, the op of this project: a row-wise
reduction (b, n) -> (b,) whose backward is a custom_partitioning op too, so
first order only."""

import numpy as np

from adapted_logsumexp import logsumexp, logsumexp_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse


def logsumexp_f64(x):
    """Independent float64 NumPy: the row maximum taken out before exp."""
    row_max = x.max(axis=-1, keepdims=True)
    return (row_max + np.log(np.exp(x - row_max).sum(axis=-1, keepdims=True)))[..., 0]


# custom_partitioning has no autodiff rule, so the op is a custom_vjp: reverse
# mode only, and first order only (its backward is another partitioned op).
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: the op is a custom_vjp (custom_partitioning has no autodiff rule); use reverse mode",
)

# Its backward is a custom_partitioning op (under an Explicit mesh, a
# shard_map with a pmax), which JAX cannot differentiate: first order only.
FIRST_ORDER = Refuse(
    (NotImplementedError, ValueError),
    r"Differentiation rule for '(custom_partitioning|pmax)' not implemented"
    r"|Linearization failed to produce known values",
    "refused: the backward is a custom_partitioning op, which JAX cannot differentiate;"
    " wrap it in a custom_vjp of its own for second order",
)

SPEC = OpSpec(
    name="logsumexp",
    op=logsumexp,
    reference=logsumexp_reference,
    oracle=logsumexp_f64,
    args=(Arg("x", ("b", "n")),),
    outputs=(("b",),),
    sizes={"b": 8, "n": 16},
    # log of a sum of n exponentials: the sum's rounding (about n/2 ulps,
    # relative) becomes an absolute error of that many float32 epsilons, a few
    # ulps of a result near log(n) + max. 4.
    tolerance=Ulps(at_value=4),
    # exp(x - lse) carries lse's absolute error into a relative one: an ulp
    # of |lse| is 2**-23 * |lse| relative, 64 float32 ulps where x nears 88
    # (float32's exp edge, the hard cells): measured 58; 128.
    gradient_tolerance=Ulps(at_value=128),
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    platforms={"cpu": "", "cuda": "", "tpu": ""},
    # With n split over the automatic axis a shard_map manual over b leaves
    # free, the partitioner hands the rule no NamedSharding: the rows are
    # gathered whole, where the reference all-reduces partial sums (as the
    # rule itself does under jit).
    extra_collectives={
        "shard-map-partial-b-free-n": Collectives(
            "n gathered inside a shard_map (1 all-gather forward, 2 in the gradient),"
            " where the reference all-reduces partial sums",
            forward={"all-gather": 1},
            gradient={"all-gather": 2},
        ),
    },
    refuse={
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        "check-grads-2": FIRST_ORDER,
        "grad-grad-explicit-*": FIRST_ORDER,
        "size-n-0": Refuse(
            ValueError,
            r"zero-size array to reduction operation max",
            "refused: an empty row has no maximum to shift by",
        ),
    },
)
