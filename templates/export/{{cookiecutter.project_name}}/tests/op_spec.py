{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
{%- set op = cookiecutter.op_name -%}
{%- set skeleton = cookiecutter.example == "none" -%}
"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py); the other tests take
the reference, the oracle and the tolerances from here too.

The op is what users ship: the model exported, serialized, written to disk
and loaded back, called through Artifact (its input checks included), with
the weights baked in. Its reference is {{ op }} on the same weights.

Adapting the starter to your own model: change this file and your model, not
the conformance module. Name the inputs and their axes, the sizes the cells
use, which axes are batch-like, and for each cell the artifact does not
support, the error it raises and what to use instead.{% if skeleton %}
TODO: declare your model here, and write its float64 oracle.{% endif %}
"""

import tempfile
from functools import partial
from pathlib import Path

import jax
import numpy as np

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import {{ [cookiecutter.op_name, "init_params"] | sort | join(", ") }}

from compare import Ulps
from conformance import Arg, {% if seq and not skeleton %}Collectives, {% endif %}OpSpec, Refuse
{%- if skeleton %}

# How far the model may be from the oracle, in ulps (tests/compare.py): the
# identity is exact. Give each count its reason when you change them.
VALUES = Ulps(at_value=0)
GRADIENTS = Ulps(at_value=0)


def {{ op }}_f64(params, x{% if seq %}, mask{% endif %}):
    """The model in float64 NumPy, written independently of reference.py."""
    del params
    x = np.asarray(x, np.float64)
    return {% if seq %}np.where(np.asarray(mask, bool)[..., None], x, 0.0){% else %}np.where(np.isfinite(x), x, 0.0){% endif %}
{%- else %}

# How far the model may be from the oracle, in ulps (tests/compare.py). Its
# outputs and gradients are sums over hidden features and positions whose
# terms cancel (matmuls, tanh, softmax pooling), so the rounding is on the
# scale of the largest entry, not of each: measured at most 7.2 ulps of the
# largest output and 4.1 of the largest gradient (float32); twice that.
VALUES = Ulps(at_value=0, at_scale=16)
GRADIENTS = Ulps(at_value=0, at_scale=8)


def {{ op }}_f64(params, x{% if seq %}, mask{% endif %}):
    """The model in float64 NumPy, written independently of reference.py."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    x = np.asarray(x, np.float64)
{%- if seq %}
    seq = x.shape[1]
    h = np.tanh(x @ p["w_in"] + p["b_in"] + p["position"][:seq])
    scores = h @ p["query"]
    pooled = np.zeros((x.shape[0], h.shape[2]))
    for row in range(x.shape[0]):
        keep = np.asarray(mask[row], bool)
        if keep.any():
            s = scores[row, keep]
            weights = np.exp(s - s.max())
            pooled[row] = (weights / weights.sum()) @ h[row, keep]
{%- else %}
    pooled = np.tanh(x @ p["w_in"] + p["b_in"])
{%- endif %}
    return pooled @ p["w_out"] + p["b_out"]
{%- endif %}

{% if cookiecutter.vjp_order == "0" %}
# Every cell that differentiates: all of autodiff but the forward mode, and
# the gradient half of vmap, control flow, hard inputs, shard_map and sharded jit.
DIFFERENTIATING = ["vmap-of-grad*", "vmap-sharded-new-axis", "grad-*", "vjp", "jit-grad"]
DIFFERENTIATING += ["checkpoint", "scan", "cond", "hard-*", "size-[bs]-*"]
DIFFERENTIATING += ["shard-map-grad-*", "shard-map-partial-*", "jit-auto-*", "jit-explicit-*"]
# Serialized with vjp_order=0 (VJP_ORDER): the artifact carries no VJP.
NOT_DIFFERENTIABLE = Refuse(
    ValueError,
    r"serialized without its VJP \(vjp_order=0\)",
    "refused: serialized with vjp_order=0; re-export with vjp_order=1 to differentiate",
)
{% endif %}
# jax.export serializes VJPs, never JVPs: the artifact's derivative is
# reverse mode only.
REVERSE_ONLY = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: jax.export serializes VJPs only; use reverse mode (grad, vjp)",
)
{%- if cookiecutter.vjp_order == "1" %}
# Serialized with vjp_order=1 (VJP_ORDER): the artifact's VJP is not itself
# differentiable.
FIRST_ORDER_ONLY = Refuse(
    ValueError,
    r"cannot be differentiated twice: it was serialized with vjp_order=1",
    "refused: serialized with vjp_order=1; re-export with vjp_order=2 for second order",
)
{%- endif %}
# The artifact's signature is float32, and check_grads' finite differences
# need float64: the gradient cells compare with the float64 oracle instead.
FLOAT32_ONLY = Refuse(
    TypeError,
    r"x must be float32, got float64",
    "refused: the artifact takes float32 only; finite differences need float64"
    " (the gradient cells check it)",
)
# Inside a shard_map manual over "x" alone, with the batch also split over
# the Explicit axis "y" it leaves free: the artifact's call (exported for
# whole arrays) returns its result whole over "y", where the reference's
# stays split, so the result's type differs from the reference's.
GATHERED_OVER_FREE = Refuse(
    AssertionError,
    r"output 0: sharded P\('x', None.*\), the reference's P\(\('x', 'y'\), None.*\)",
    "refused: the result comes back whole over the Explicit axes a shard_map"
    " leaves free; make the shard_map manual over every axis",
)
# The artifact's signature fixes the feature axis (a symbolic batch only).
EMPTY = Refuse(
    ValueError,
    r"must be >= 1, got 0",
    "refused: the artifact's shape constraints ask for at least one row; skip an empty call",
)
FIXED_FEATURES = Refuse(
    ValueError,
    r"x.shape\[\d\] must be 16, got",
    "refused: the artifact's features are fixed at export; export another for another width",
)
{%- if seq %}


def mostly_true(rng, shape):
    """A padding mask: mostly True, as in real batches."""
    return rng.random(shape) < 0.8
{% endif %}

# Where the tests call the artifact: the default device if it was exported
# for that platform, else a device of one it was (a CPU-only artifact on a GPU
# host: the CPU). Made JAX's default device, so that jax.jit of the artifact
# on NumPy inputs, as the conformance cells call it, runs there too
# (tests/devices.py's mesh_devices follows it). An artifact runs only on its platforms.
DEVICE = artifact.choose_device(artifact.PLATFORMS, artifact.available_devices())
if DEVICE != jax.devices()[0]:
    jax.config.update("jax_default_device", DEVICE)

{%- if skeleton %}
# TODO: the inputs your model supports (the hard-input cells stay within them).
FEATURES = (-float("inf"), float("inf"))
{%- else %}
# The model takes standardized features. Far beyond them, its first layer's
# sums cancel terms as large as the inputs: at |x| near 88 (the hard cells'
# exp edge) the gradient is 135 ulps of its largest entry off, against 4 at
# |x| of order 1. Within |x| <= 16 the tolerances hold.
FEATURES = (-16.0, 16.0)
{%- endif %}

PARAMS = init_params()
with tempfile.TemporaryDirectory() as tmp:  # load reads the files whole
    LOADED = artifact.load(artifact.save(artifact.export_model(PARAMS), Path(tmp, "model.jax")))

SPEC = OpSpec(
    name="{{ op }}",
    op=LOADED,
    reference=partial({{ op }}, PARAMS),
    oracle=partial({{ op }}_f64, PARAMS),
{%- if seq %}
    args=(
        Arg("x", ("b", "s", "f"), domain=FEATURES),
        Arg("mask", ("b", "s"), differentiable=False, dtype="bool", sample=mostly_true),
    ),
{%- else %}
    args=(Arg("x", ("b", "f"), domain=FEATURES),),
{%- endif %}
{%- if skeleton %}
    outputs=(({% if seq %}"b", "s", "f"{% else %}"b", "f"{% endif %}),),
    sizes={"b": 8, {% if seq %}"s": 4, {% endif %}"f": 16},
{%- else %}
    outputs=(("b", "c"),),
    sizes={"b": 8, {% if seq %}"s": 4, {% endif %}"f": 16, "c": 4},
{%- endif %}
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # No batch_axes: the artifact's signature has b, it takes no input without
    # it; vmap over a new axis folds that axis into b (composable_call).
    shard_map_axes=("b",),
    symbolic_axis="b",
    # Plain StableHLO on every platform exported, no custom call. The CPU's
    # module is called by lower-cpu; an artifact for several platforms holds
    # one program for each and picks the target's by its index (a case).
    platforms={ {%- for p in cookiecutter.platforms.split(",") %}"{{ p }}": {% if p == "cpu" %}""{% else %}r"stablehlo\.case"{% endif %}{% if not loop.last %}, {% endif %}{% endfor -%} },
{%- if seq and not skeleton %}
    # Split along s, the artifact's program sums over the sequence with four
    # all-reduces, in each program; JAX refuses the reference's matmul that
    # contracts over it (its output sharding is ambiguous).
    extra_collectives={
        "jit-explicit*-s": Collectives(
            "the sums over the split sequence are all-reduced, where JAX refuses the"
            " reference's matmul on these shardings",
            forward={"all-reduce": 4},
            gradient={"all-reduce": 4},
        ),
    },
{%- endif %}
    refuse={
        # First: with no VJP, size-[bs]-* are refused as differentiating, but
        # an empty axis fails the forward before any gradient is asked for.
        "size-[bs]-0": EMPTY,
{%- if cookiecutter.vjp_order == "0" %}
        **dict.fromkeys(DIFFERENTIATING, NOT_DIFFERENTIABLE),
{%- endif %}
        "jvp": REVERSE_ONLY,
        "linearize": REVERSE_ONLY,
        "check-grads-*": FLOAT32_ONLY,
        "size-f-*": FIXED_FEATURES,
        "shard-map-partial-explicit-b": GATHERED_OVER_FREE,
{%- if cookiecutter.vjp_order == "1" %}
        "grad-grad-explicit-*": FIRST_ORDER_ONLY,
{%- endif %}
    },
)
