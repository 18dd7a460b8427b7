"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

{% if cookiecutter.example == "none" -%}
from compare import Ulps
from conformance import {% if cookiecutter.sharded_axes == "batch" %}Collectives, {% endif %}OpSpec, Refuse
{%- else -%}
from conformance import Arg, Collectives, OpSpec, Refuse
from oracle import GRADIENTS, VALUES, top_k_f64

# k is static (it fixes the output shape): the cells call the op at one k.
K = 3
{%- endif %}

# custom_partitioning has no autodiff rule, so the op is a custom_vjp: reverse
# mode only (second order included: the forward op has a custom_jvp, the
# backward op a custom_vjp of its own).
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: the op is a custom_vjp (custom_partitioning has no autodiff rule); use reverse mode",
)

{%- if cookiecutter.example != "none" and cookiecutter.sharded_axes == "batch,items" %}
# Split along n: each shard's k candidates, values and indices, are gathered
{%- if cookiecutter.normalize == "softmax" %}
# (two all-gathers), and the normalization sums the whole row (two
# all-reduces: its maximum and its sum of exponentials).
CANDIDATES = {"all-gather": 2, "all-reduce": 2}
{%- else %}
# (two all-gathers).
CANDIDATES = {"all-gather": 2}
{%- endif %}
{%- endif %}

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
{%- if cookiecutter.example == "none" %}
    # TODO: your op and its reference (a lambda fixes any static argument).
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
    # TODO: None holds the op to the reference run in float64; or write an
    # independent float64 NumPy oracle with the op's signature.
    oracle=None,
    # TODO: your arguments and outputs, each axis named; sizes for the cells.
    signature="x[b,n] -> [b,n]",
    sizes={"b": 8, "n": 16},
    # TODO: how many ulps your op may be from the oracle, and why. Here each
    # value and each gradient entry is one rounded product (2 * x is exact):
    # half an ulp, so 1.
    tolerance=Ulps(1),
    gradient_tolerance=Ulps(1),
{%- else %}
    op=lambda x: {{ cookiecutter.op_name }}(x, K),
    reference=lambda x: {{ cookiecutter.op_name }}_reference(x, K),
    oracle=lambda x: top_k_f64(x, K),
    args=(Arg("x", ("b", "n")),),
    # Values, and the integer indices (not differentiated).
    outputs=(("b", "k"), ("b", "k")),
    sizes={"b": 8, "n": 16, "k": K},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Finite inputs only: NaN has no place in an order (lax.top_k ranks it
    # above +inf, the float64 oracle's sort below), so the non-finite hard
    # cells would test a convention, not the op.
    finite=True,
{%- endif %}
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    # Unsharded, the partitioned op lowers to its plain StableHLO everywhere.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
    refuse={
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
{%- if cookiecutter.example != "none" %}
        "size-n-[01]": Refuse(
            ValueError,
            r"k must be an int in \[1, [01]\]",
            "refused: one item or none has no top k (k is at most the number of items)",
        ),
{%- endif %}
    },
{%- if cookiecutter.example == "none" and cookiecutter.sharded_axes == "batch" %}
    # Counted on the cells' mesh of 4 devices: one all-gather in the forward
    # program, two in the gradient's.
    extra_collectives={
        "jit-*-n": Collectives(
            "the rule asks for whole rows (sharded_axes=batch): the items axis is"
            " gathered, where the reference needs no collective",
            forward={"all-gather": 1},
            gradient={"all-gather": 2},
        ),
        # The items axis split over the automatic axis a shard_map leaves
        # free: gathered the same way.
        "shard-map-partial-b-free-n": Collectives(
            "the rule asks for whole rows (sharded_axes=batch): the items axis is"
            " gathered, where the reference needs no collective",
            forward={"all-gather": 1},
            gradient={"all-gather": 2},
        ),
    },
{%- elif cookiecutter.example != "none" %}
    # Split along n, both programs (the gradient recomputes the forward)
    # gather; under explicit axes the reference's top_k there gathers the
    # whole row (JAX 0.12.1), or is refused (JAX 0.12.0 and older).
    extra_collectives={
{%- if cookiecutter.sharded_axes == "batch,items" %}
        "jit-auto-n": Collectives(
            "two all-gathers (values, indices) of k candidates per shard,"
            " where the reference gathers the whole row once",
            forward=CANDIDATES,
            gradient=CANDIDATES,
        ),
        "jit-explicit*-n": Collectives(
            "two all-gathers (values, indices) of k candidates per shard,"
            " where the reference's top_k gathers the whole row once"
            " (JAX 0.12.0 and older refuse it along a split axis)",
            forward=CANDIDATES,
            gradient=CANDIDATES,
        ),
{%- else %}
        "jit-explicit*-n": Collectives(
            "the rule asks for whole rows (sharded_axes=batch): one all-gather,"
            " as the reference's top_k (JAX 0.12.0 and older refuse it along a"
            " split axis)",
            forward={"all-gather": 1},
            gradient={"all-gather": 1},
        ),
{%- endif %}
{%- if cookiecutter.normalize == "softmax" %}
        # The items split over the automatic axis a shard_map leaves free: the
        # softmax's gradient gathers them twice where the reference's does
        # once (counted on JAX 0.10.2 and 0.12.1).
        "shard-map-partial-b-free-n": Collectives(
            "the softmax's gradient gathers the items split over the free axis twice,"
            " the reference's once",
            gradient={"all-gather": 2},
        ),
{%- endif %}
    },
{%- endif %}
)
