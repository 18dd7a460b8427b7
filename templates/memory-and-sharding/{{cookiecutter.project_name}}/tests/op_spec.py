{%- set example = cookiecutter.example != "none" -%}
"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py); and the op's
tolerances, which every test uses.

The op is `loss`, the function users differentiate, vmap, scan and export;
`train_step` is only jit(value_and_grad(loss)) and an update. It runs here
with one residual block, its weights as arguments, on a mesh with Auto axes
passed as `mesh=`: that makes it a plain function of arrays, which the cells
can call with no `jax.set_mesh` and on inputs placed anyhow. Inside, the
block still gathers its weights in a shard_map and remats as configured. The
loss is a scalar over the whole batch, so no axis is batch-like and none can
be split by an outer shard_map (the loss is one).

Adapting the starter to your own block: change this file, the block
({{ cookiecutter.op_name }}.py) and its reference (reference.py), not the
conformance module. Name the block's weights and their axes (as in WEIGHTS),
the sizes the cells use, and for each cell the op does not support, the
error it raises and what to use instead.
{%- if not example %}

TODO: your block's weights in the Args and in one_block_loss and
one_block_reference, and your tolerances with the reason for each count.
{%- endif %}
"""

{% if cookiecutter.remat == "regather" -%}
import jax
{% endif -%}
from jax.sharding import AxisType

from {{ cookiecutter.package_name }} import loss, make_mesh, reference_loss

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse
from devices import mesh_devices

# How far the sharded model may be from the float64 oracle (the reference
# model in float64), in ulps (tests/compare.py).
{%- if example %}
# The loss is a sum of squares (no cancellation) and a block's output h +
# tanh(h @ w_in) @ w_out adds a correction to h: a few ulps of each value.
VALUES = Ulps(at_value=4)
# A weight's gradient sums over the batch and the hidden features, and its
# terms cancel: the rounding is on the scale of the largest entry, not of each.
GRADIENTS = Ulps(at_value=0, at_scale=16)
# A step's new weights and momenta, w - learning_rate * m: the gradient's
# rounding, scaled down by the learning rate, on weights of the largest
# entry's size.
STEPS = Ulps(at_value=0, at_scale=8)
{%- else %}
# TODO: your block's tolerances, each with the reason for its count. These
# fit a linear block: sums of products, whose gradient terms cancel, and
# nothing bounds h from block to block, so a step's rounding grows with it.
VALUES = Ulps(at_value=4)
GRADIENTS = Ulps(at_value=0, at_scale=16)
STEPS = Ulps(at_value=0, at_scale=32)
{%- endif %}

# Standardized data: far beyond it (|x| near 88, the hard cells' exp edge)
# the saturated tanh's gradients are 1e-12 in float64 and exactly 0 in
# float32, a float32 limit of any such model, not of the sharding.
DATA = (-8.0, 8.0)


def initialized(rng, shape):
    """Weights at the scale of a fan-in initialization."""
    return rng.standard_normal(shape) / shape[0] ** 0.5


# The devices of the cells' own meshes, so that inputs they shard can reach it.
MESH = make_mesh(mesh_devices(4), AxisType.Auto)


def one_block_loss(w_in, w_out, x, y):
    return loss([(w_in, w_out)], x, y, mesh=MESH)


def one_block_reference(w_in, w_out, x, y):
    return reference_loss([(w_in, w_out)], x, y)


# Arrays typed with another mesh's Explicit axes cannot move to the step's
# mesh inside jit; the loss says where to put them.
OTHER_MESH = Refuse(
    ValueError,
    r"sharded over Explicit axes .* of another mesh: put it on the step's mesh",
    "refused: Explicit inputs of another mesh; put them on the step's mesh first",
)

# The step's own communication, whatever the inputs' layout: its FSDP gathers
# of the weights, all-to-alls into its layout and the gradient's
# reduce-scatters, for inputs split along each axis: (forward, gradient),
# counted on the cells' mesh of 4 devices.
{%- if cookiecutter.remat == "regather" %}
# remat=regather: the backward gathers the weights again (2 all-gathers more),
# except under JAX 0.10, whose XLA:CPU merges them with the forward's.
REGATHERED = 0 if jax.__version_info__ < (0, 11) else 2
{%- endif %}
{%- if cookiecutter.parallelism == "fsdp" %}
STEP_COLLECTIVES = {
    "d": (
        {"all-gather": 2, "all-reduce": 1, "all-to-all": 2},
        {"all-gather": 2{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %}, "all-to-all": 2, "reduce-scatter": 2},
    ),
    "f": (
        {"all-gather": 2, "all-reduce": 1, "all-to-all": 2},
        {"all-gather": 2{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %}, "all-to-all": 2, "reduce-scatter": 2},
    ),
    "b": (
        {"all-gather": 2, "all-reduce": 1},
        {"all-gather": 2{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %}, "reduce-scatter": 2},
    ),
}
{%- else %}
STEP_COLLECTIVES = {
    "d": (
        {"all-gather": 4, "all-reduce": 2, "all-to-all": 2},
        {"all-gather": 4{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %}, "all-reduce": 2, "all-to-all": 2, "reduce-scatter": 2},
    ),
    "f": (
        {"all-gather": 2, "all-reduce": 2, "all-to-all": 2, "collective-permute": 2},
        {
            "all-gather": 2{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %},
            "all-reduce": 2,
            "all-to-all": 2,
            "collective-permute": 2,
            "reduce-scatter": 2,
        },
    ),
    "b": (
        {"all-gather": 4, "all-reduce": 2},
        {"all-gather": 4{% if cookiecutter.remat == "regather" %} + REGATHERED{% endif %}, "all-reduce": 2, "reduce-scatter": 2},
    ),
}
{%- endif %}

# The step splits the batch and the model width over the mesh's 4 devices
# (FSDP): other sizes are refused, saying which.
INDIVISIBLE = Refuse(
    ValueError,
    r"is not divisible by the \d+ devices of mesh axis",
    "refused: the step splits this axis over the mesh's devices; pad it to a multiple of them",
)

SYMBOLIC = Refuse(
    ValueError,
    r"the step needs concrete shapes",
    "refused: a symbolic batch crashes XLA when called; export one artifact per batch size",
)

# A model dimension of 0: XLA has no all-gather of an empty dimension.
EMPTY_MODEL = Refuse(
    ValueError,
    r"all_gather_dim' cannot be zero",
    "refused: XLA gathers no empty model dimension; a layer of width 0 has no weights to shard",
)

SPEC = OpSpec(
    name="loss",
    op=one_block_loss,
    reference=one_block_reference,
{%- if example %}
    oracle=None,  # the reference in float64 (test_reference.py checks it by hand)
{%- else %}
    oracle=None,  # the reference in float64
{%- endif %}
    # The hard-input cells vary the data, within standardized features
    # (DATA); the weights keep the scale of an initialization (their own
    # sample), where a tanh's derivative, 1 - tanh**2, is not all rounding.
    args=(
        Arg("w_in", ("d", "f"), sample=initialized),
        Arg("w_out", ("f", "d"), sample=initialized),
        Arg("x", ("b", "d"), domain=DATA),
        Arg("y", ("b", "d"), domain=DATA),
    ),
    outputs=((),),
    symbolic_axis="b",
    sizes={"b": 8, "d": 8, "f": 16},  # every one divisible by the mesh axes
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Plain StableHLO on every platform; the module holds the FSDP gather.
    platforms={"cpu": "all_gather", "cuda": "all_gather", "tpu": "all_gather"},
    # The step chooses its own communication, whatever the inputs' layout.
    extra_collectives={
        f"jit-auto-{axis}": Collectives(
            "its own FSDP gathers, and all-to-alls into its layout",
            forward=forward,
            gradient=gradient,
        )
        for axis, (forward, gradient) in STEP_COLLECTIVES.items()
    },
    refuse={
        "jit-explicit-*": OTHER_MESH,
        "grad-grad-explicit-*": OTHER_MESH,
        "vmap-sharded-new-axis": OTHER_MESH,
        "export-symbolic": SYMBOLIC,
        "size-d-0": EMPTY_MODEL,
{%- if cookiecutter.parallelism == "fsdp" %}
        "size-[bd]-1": INDIVISIBLE,
        "size-[bd]-ragged": INDIVISIBLE,
{%- else %}
        "size-[bdf]-1": INDIVISIBLE,
        "size-[bdf]-ragged": INDIVISIBLE,
{%- endif %}
    },
)
