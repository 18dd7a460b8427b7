"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py); tests/test_reference.py
and benchmarks/bench.py work from it too.

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), the float64 oracle and the tolerances, and for each cell the op
does not support, the error it raises and what to use instead.
"""

{% if cookiecutter.example != "none" -%}
import jax
{% endif -%}
import numpy as np

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

from compare import Ulps
{% if cookiecutter.example == "none" -%}
from conformance import OpSpec{% if cookiecutter.rule == "vjp" %}, Refuse{% endif %}
{% else -%}
from conformance import Arg, Collectives, OpSpec{% if cookiecutter.rule == "vjp" %}, Refuse{% endif %}
{% endif %}
{%- if cookiecutter.rule == "vjp" %}
# A custom_vjp function has a reverse rule only: JAX refuses forward mode.
# (check-grads-* then check reverse mode alone.)
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused by JAX: custom_vjp has no forward rule; generate with rule=jvp for forward mode",
)
{% endif %}
{%- if cookiecutter.example == "none" %}
# How far the op may be from the oracle, in ulps (tests/compare.py), each count
# with the reason for it. TODO: your op's error model.
# The identity is exact: no rounding at all.
VALUES = Ulps(at_value=0)
# Its gradient is the cotangent itself: exact too.
GRADIENTS = Ulps(at_value=0)


def oracle_f64(x):
    """TODO: your op in float64 NumPy, independent of the op and the reference."""
    return np.asarray(x, dtype=np.float64) * 1


# The benchmark's sizes, largest last (benchmarks/bench.py): --quick takes the
# first, a full run (and its plot, a curve: three or more) the rest. Declare
# bench_flops(sizes) -> the FLOPs of one value-and-grad, and the benchmark
# prints them as a share of the chip's peak (the identity computes none).
BENCH_SIZES = [
    {"n": 256, "k": 256},
    {"n": 512, "k": 512},
    {"n": 1024, "k": 1024},
    {"n": 2048, "k": 1024},
]

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
    # TODO: your float64 oracle, or None to take the reference run in float64.
    oracle=oracle_f64,
    # TODO: your arguments, each with its named axes, and the axes of each
    # output ("x[n,k], w[k] -> [n,k]"; "idx[n]:int32" an integer argument;
    # per-argument domains and samples: arg_options, or Arg in args=).
    signature="x[n,k] -> [n,k]",
    sizes={"n": 8, "k": 4},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Elementwise: each shard of the input gives that shard of the output.
    shard_map_axes=("n", "k"),
    symbolic_axis="n",
    # Plain StableHLO on every platform: the module holds no custom call.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
{%- if cookiecutter.rule == "vjp" %}
    refuse={"jvp": FORWARD_MODE, "linearize": FORWARD_MODE},
{%- endif %}
)
{%- else %}
# How far the op may be from the oracle, in ulps (tests/compare.py). The
# inputs are the op's own, rounded to its dtype, so only the op's rounding
# counts. Half precision is computed in float32 and rounded once: that half
# ulp is allowed on top (compare.py), and the counts below are float32's.
#
# A distance is a sum of k squares (k up to 512 in the tests) and a square
# root, which halves the sum's relative error: measured at most 1.7 ulps in
# float32 and 4 in float64 (512 features); 6 leaves room for another
# summation order.
DISTANCES = Ulps(at_value=6)
# A gradient entry sums one term per point of the other set (up to 4096 in
# the tests), and the terms cancel: their rounding is on the scale of the
# largest entries, not of each entry. Measured at most 22 ulps of the largest
# entry (rule=jvp's transposed products, 2048 points, float32; rule=vjp 12);
# 32. The forward-mode tangents are sums of the same kind.
GRADIENTS = Ulps(at_value=0, at_scale=32)


def distances_f64(x, y):
    """The float64 NumPy oracle: independent of the op and the reference."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    diff = x[:, None, :] - y[None, :, :]
    return np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))


def distances_vjp_f64(x, y, cotangent):
    """Gradient of sum(cotangent * d) with respect to x and y.

    Where x_i == y_j the pair contributes 0 (the minimum-norm subgradient).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    diff = x[:, None, :] - y[None, :, :]
    d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(d == 0, 0.0, np.asarray(cotangent, np.float64) / d)
    weighted = weight[:, :, None] * diff
    return weighted.sum(axis=1), -weighted.sum(axis=0)


# The benchmark's sizes (benchmarks/bench.py; --quick takes the first). The
# last one's (n, m, k) differences alone are 4.3 GB in float32.
BENCH_SIZES = [
    {"n": 256, "m": 256, "k": 16},
    {"n": 512, "m": 512, "k": 16},
    {"n": 1024, "m": 1024, "k": 64},
    {"n": 2048, "m": 256, "k": 3},
    {"n": 4096, "m": 4096, "k": 16},
    {"n": 4096, "m": 4096, "k": 64},
]


def bench_flops(sizes: dict[str, int]) -> int:
    """The FLOPs of one value-and-grad at these sizes, for the benchmark's share
    of the chip's peak: the forward's difference, square and sum per pair and
    feature (3nmk), and the backward's two products of the (n, m) weights with
    the points (4nmk). The per-pair square roots and divisions (nm) are left out."""
    n, m, k = sizes["n"], sizes["m"], sizes["k"]
    return 7 * n * m * k


# The coordinates the op supports: see the args below.
POINTS = (-1e18, 1e18)
SMALLEST = 1e-15
MODES = ("auto", "explicit", "explicit-set-mesh")  # the jit-* cells of one mesh axis
# The gradient program's collectives where the rule's differ from autodiff's.
POINTS_SPLIT = Collectives(
    "5 small all-reduces (centre, near-duplicate test, two products), not 1",
    gradient={"all-reduce": 5},
)
FEATURES_SPLIT = Collectives(
    "2 all-gathers (the products contract over the split features), not 0",
    gradient={"all-gather": 2, "all-reduce": 1},
)
BOTH_SPLIT = Collectives(
    POINTS_SPLIT.why + ", and 4 all-gathers, not 1",
    gradient={"all-gather": 4, "all-reduce": 5},
)
{%- if cookiecutter.rule == "vjp" %}
# Second order of vmap of the op on an Explicit mesh: JAX batches the
# backward's lax.cond (near-duplicates) into a select whose predicate carries
# no sharding, and refuses it against the split cases (JAX 0.12).
BATCHED_COND = Refuse(
    Exception,
    r"select `which` must be scalar or have the same sharding as cases",
    "refused: JAX's batched lax.cond on Explicit shardings (the rule's"
    " near-duplicate branch); jax.set_mesh does not help: vmap the first order",
)
{%- endif %}
# In a shard_map manual over "x" alone, the points are still split over "y".
PARTLY_MANUAL = Collectives(
    "{{ 6 if cookiecutter.rule == 'vjp' else 7 }} small all-reduces over the points split over the automatic axis, not 2",
    gradient={"all-reduce": {{ 6 if cookiecutter.rule == "vjp" else 7 }}},
)
# Where that free axis is Explicit, JAX 0.10's partitioner also all-gathers
# the points in the rule's backward (counted on JAX 0.10.2; 0.11.2 and 0.12.1
# gather none): the gradient program's all-gathers per manual axis. The note
# is the same on every JAX, so the README's table is too.
OLD_JAX_GATHERS = {{ '{"n": 4, "m": 4}' if cookiecutter.rule == "vjp" else '{"n": 8, "m": 9}' }}
OLD_JAX = jax.__version_info__ < (0, 11)
EXPLICIT_PARTLY_MANUAL = {
    f"shard-map-partial-explicit-{axis}": Collectives(
        PARTLY_MANUAL.why + f", and JAX 0.10 all-gathers the points ({gathers} all-gathers)",
        gradient={**PARTLY_MANUAL.gradient, "all-gather": gathers if OLD_JAX else 0},
    )
    for axis, gathers in OLD_JAX_GATHERS.items()
}

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
    oracle=distances_f64,
    # The gradient oracle states the rule's subgradient, 0, where points
    # coincide (the hard cells' zeros and ties), where the reference's
    # autodiff is NaN: the very case the rule exists for.
    gradient_oracle=distances_vjp_f64,
    # A squared difference must stay finite in float32 (|x - y| below about
    # 1e19), and the squares of tiny ones are flushed to zero below float32's
    # smallest normal number (1.2e-38): distances below about 1e-16 lose more
    # than the tolerance. The hard cells stay within both bounds.
    args=(
        Arg("x", ("n", "k"), domain=POINTS, smallest=SMALLEST),
        Arg("y", ("m", "k"), domain=POINTS, smallest=SMALLEST),
    ),
    outputs=(("n", "m"),),
    sizes={"n": 8, "m": 4, "k": 4},
    tolerance=DISTANCES,
    gradient_tolerance=GRADIENTS,
    # No batch axes: the op takes 2-D point sets only (vmap adds the batch).
    # Each shard of x's points (or y's) gives that shard of the rows (columns).
    shard_map_axes=("n", "m"),
    symbolic_axis="n",
    # Plain StableHLO on every platform: the module holds no custom call.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
    # The rule's gradient communicates more than autodiff's (the forward no
    # more): with the points split, the centring's mean, the near-duplicate
    # test and the two matrix products each sum over the split points, small
    # all-reduces where autodiff fuses its sums into one; with the features
    # split, the products contract over them and gather both point sets.
    # Counted on 4 CPU devices; each is a vector of k numbers or one (n, m)
    # weight matrix.
    extra_collectives={
        **{f"jit-{mode}-{axis}": POINTS_SPLIT for mode in MODES for axis in "nm"},
        **{f"jit-{mode}-k": FEATURES_SPLIT for mode in MODES},
        "jit-auto-n+m": BOTH_SPLIT,
        "jit-explicit-2d-*": POINTS_SPLIT,
        # The features split over the automatic axis a shard_map leaves free.
        "shard-map-partial-*-free-k": Collectives(
            FEATURES_SPLIT.why,
            gradient={"all-gather": 2, "all-reduce": {{ 2 if cookiecutter.rule == "vjp" else 3 }}},
        ),
        **EXPLICIT_PARTLY_MANUAL,
        "shard-map-partial-*": PARTLY_MANUAL,
    },
{%- if cookiecutter.rule == "vjp" %}
    refuse={
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        # (the new axis split is fine: the select's cases are not split)
        "grad-grad-explicit-vmap-[nmk]": BATCHED_COND,
    },
{%- endif %}
)
{%- endif %}
