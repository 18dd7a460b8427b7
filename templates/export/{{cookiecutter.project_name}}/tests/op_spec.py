{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

The op is what users ship: the model exported, serialized, written to disk
and loaded back, called through Artifact (its input checks included), with
the weights baked in. Its reference is predict on the same weights.

Adapting the starter to your own model: change this file and your model, not
the conformance module. Name the inputs and their axes, the sizes the cells
use, which axes are batch-like, and for each cell the artifact does not
support, the error it raises and what to use instead.
"""

import tempfile
from functools import partial
from pathlib import Path

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import init_params, predict

from conformance import Arg, OpSpec, Refuse
from oracle import GRADIENTS, VALUES, predict_f64
{% if cookiecutter.vjp_order == "0" %}
# Every cell that differentiates: all of autodiff but the forward mode, and
# the gradient half of vmap, control flow, shard_map and sharded jit.
DIFFERENTIATING = ["vmap-of-grad", "grad-*", "vjp", "jit-grad", "checkpoint", "scan", "cond"]
DIFFERENTIATING += ["shard-map-grad-*", "jit-auto-*", "jit-explicit-*"]
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
# The artifact's signature is float32, and check_grads' finite differences
# need float64: the gradient cells compare with the float64 oracle instead.
FLOAT32_ONLY = Refuse(
    TypeError,
    r"x must be float32, got float64",
    "refused: the artifact takes float32 only; finite differences need float64"
    " (the gradient cells check it)",
)
{%- if seq %}


def mostly_true(rng, shape):
    """A padding mask: mostly True, as in real batches."""
    return rng.random(shape) < 0.8
{% endif %}

PARAMS = init_params()
with tempfile.TemporaryDirectory() as tmp:  # load reads the files whole
    LOADED = artifact.load(artifact.save(artifact.export_model(PARAMS), Path(tmp, "model.jax")))

SPEC = OpSpec(
    name="predict",
    op=LOADED,
    reference=partial(predict, PARAMS),
    oracle=partial(predict_f64, PARAMS),
{%- if seq %}
    args=(
        Arg("x", ("b", "s", "f")),
        Arg("mask", ("b", "s"), differentiable=False, dtype="bool", sample=mostly_true),
    ),
{%- else %}
    args=(Arg("x", ("b", "f")),),
{%- endif %}
    outputs=(("b", "c"),),
    sizes={"b": 8, {% if seq %}"s": 4, {% endif %}"f": 16, "c": 4},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # No batch_axes: the artifact's signature has b, it takes no input without
    # it; vmap over a new axis folds that axis into b (composable_call).
    shard_map_axes=("b",),
    symbolic_axis="b",
    # Plain StableHLO on every platform exported: the module holds no custom call.
    platforms={ {%- for p in cookiecutter.platforms.split(",") %}"{{ p }}": ""{% if not loop.last %}, {% endif %}{% endfor -%} },
    refuse={
{%- if cookiecutter.vjp_order == "0" %}
        **dict.fromkeys(DIFFERENTIATING, NOT_DIFFERENTIABLE),
{%- endif %}
        "jvp": REVERSE_ONLY,
        "linearize": REVERSE_ONLY,
        "check-grads-*": FLOAT32_ONLY,
    },
)
