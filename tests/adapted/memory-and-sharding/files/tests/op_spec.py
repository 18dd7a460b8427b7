"""The declaration of a SwiGLU block's loss, the op of this project: one
residual block of three weights (gate, up, down) on a mesh with Auto axes
passed as `mesh=`, so a plain function of arrays for the cells."""

from jax.sharding import AxisType

from adapted_swiglu import loss, make_mesh, reference_loss

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse
from devices import mesh_devices

# How far the sharded model may be from the float64 oracle (the reference
# model in float64), in ulps (tests/compare.py).
# The loss is a sum of squares (no cancellation) and a block's output adds a
# correction to h: a few ulps of each value.
VALUES = Ulps(at_value=4)
# A weight's gradient sums over the batch and the hidden features, and its
# terms cancel: the rounding is on the scale of the largest entry, not of each.
GRADIENTS = Ulps(at_value=0, at_scale=16)
# A step's new weights and momenta, w - learning_rate * m: the gradient's
# rounding, scaled down by the learning rate, on weights of the largest
# entry's size; the gate's product adds to the gradient's rounding.
STEPS = Ulps(at_value=0, at_scale=16)

# The devices of the cells' own meshes, so that inputs they shard can reach it.
MESH = make_mesh(mesh_devices(4), AxisType.Auto)


def one_block_loss(w_gate, w_up, w_down, x, y):
    return loss([(w_gate, w_up, w_down)], x, y, mesh=MESH)


def one_block_reference(w_gate, w_up, w_down, x, y):
    return reference_loss([(w_gate, w_up, w_down)], x, y)


# Arrays typed with another mesh's Explicit axes cannot move to the step's
# mesh inside jit; the loss says where to put them.
OTHER_MESH = Refuse(
    ValueError,
    r"sharded over Explicit axes .* of another mesh: put it on the step's mesh",
    "refused: Explicit inputs of another mesh; put them on the step's mesh first",
)

INDIVISIBLE = Refuse(
    ValueError,
    r"is not divisible by the 4 devices of mesh axis",
    "refused: the step splits this axis over 4 devices; pad it to a multiple of 4",
)
SYMBOLIC = Refuse(
    ValueError,
    r"the step needs concrete shapes",
    "refused: a symbolic batch crashes XLA when called; export one artifact per batch size",
)

# The hard-input cells vary the data within standardized features; the
# weights keep an initialization's scale (their own sample).
DATA = (-8.0, 8.0)


def initialized(rng, shape):
    """Weights at the scale of a fan-in initialization."""
    return rng.standard_normal(shape) / shape[0] ** 0.5


SPEC = OpSpec(
    name="loss",
    op=one_block_loss,
    reference=one_block_reference,
    oracle=None,  # the reference in float64
    args=(
        Arg("w_gate", ("d", "f"), sample=initialized),
        Arg("w_up", ("d", "f"), sample=initialized),
        Arg("w_down", ("f", "d"), sample=initialized),
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
    # Counted on the cells' mesh of 4 devices: the FSDP gathers of the three
    # weights, all-to-alls into the step's layout, and the gradient's
    # reduce-scatters.
    extra_collectives={
        "jit-auto-d": Collectives(
            "its own FSDP gathers, and all-to-alls into its layout",
            forward={"all-gather": 3, "all-reduce": 1, "all-to-all": 2},
            gradient={"all-gather": 3, "all-to-all": 2, "reduce-scatter": 3},
        ),
        "jit-auto-f": Collectives(
            "its own FSDP gathers, and all-to-alls into its layout",
            forward={"all-gather": 3, "all-reduce": 1, "all-to-all": 3},
            gradient={"all-gather": 3, "all-to-all": 3, "reduce-scatter": 3},
        ),
        "jit-auto-b": Collectives(
            "its own FSDP gathers, and all-to-alls into its layout",
            forward={"all-gather": 3, "all-reduce": 1},
            gradient={"all-gather": 3, "reduce-scatter": 3},
        ),
    },
    refuse={
        "jit-explicit-*": OTHER_MESH,
        "grad-grad-explicit-*": OTHER_MESH,
        "vmap-sharded-new-axis": OTHER_MESH,
        "export-symbolic": SYMBOLIC,
        "size-[bd]-1": INDIVISIBLE,
        "size-[bd]-ragged": INDIVISIBLE,
        "size-d-0": Refuse(
            ValueError,
            r"all_gather_dim' cannot be zero",
            "refused: XLA gathers no empty model dimension",
        ),
    },
)
