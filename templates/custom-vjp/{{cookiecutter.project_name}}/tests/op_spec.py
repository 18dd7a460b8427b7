"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""

from {{ cookiecutter.package_name }} import pairwise_distances, pairwise_distances_reference

{% if cookiecutter.rule == "vjp" -%}
from conformance import Arg, OpSpec, Refuse
{% else -%}
from conformance import Arg, OpSpec
{% endif -%}
from oracle import DISTANCES, GRADIENTS, distances_f64
{%- if cookiecutter.rule == "vjp" %}

# A custom_vjp function has a reverse rule only: JAX refuses forward mode.
# (check-grads-* then check reverse mode alone.)
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused by JAX: custom_vjp has no forward rule; generate with rule=jvp for forward mode",
)
{%- endif %}

SPEC = OpSpec(
    name="pairwise_distances",
    op=pairwise_distances,
    reference=pairwise_distances_reference,
    oracle=distances_f64,
    # Random normal points: no two coincide, so the reference's gradient (the
    # cells' gradient oracle) is defined; coincident points have their own tests.
    args=(Arg("x", ("n", "k")), Arg("y", ("m", "k"))),
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
    # Points split over one axis of a 2-D mesh: the centring's mean and the
    # rule's two matrix products each sum over the split points, three small
    # all-reduces where the reference's autodiff fuses its sums into one.
    extra_collectives={"jit-explicit-2d-*": "3 small all-reduces (centre, two products), not 1"},
{%- if cookiecutter.rule == "vjp" %}
    refuse={"jvp": FORWARD_MODE, "linearize": FORWARD_MODE},
{%- endif %}
)
