"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""
{%- if cookiecutter.lowering == "ffi" %}

from jax import export
{%- endif %}

from {{ cookiecutter.package_name }} import tridiagonal_matvec, tridiagonal_matvec_reference
{%- if cookiecutter.lowering == "ffi" %}
from {{ cookiecutter.package_name }}.ffi_target import TARGET
{%- endif %}

from conformance import Arg, OpSpec, Refuse
from oracle import GRADIENTS, VALUES, tridiagonal_matvec_f64

# The primitive works along the last axis, n: sharding it would split a row's
# neighbours between devices, so the abstract evaluation refuses it.
SHARDED_ROW = Refuse(
    TypeError,
    r"tridiagonal_matvec: the last axis .* is sharded",
    "refused: the last axis couples neighbours; shard the batch axis, or reshard first",
)

SPEC = OpSpec(
    name="tridiagonal_matvec",
    op=tridiagonal_matvec,
    reference=tridiagonal_matvec_reference,
    oracle=tridiagonal_matvec_f64,
    args=(
        Arg("dl", ("b", "n")),
        Arg("d", ("b", "n")),
        Arg("du", ("b", "n")),
        Arg("x", ("b", "n")),
    ),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 12},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
{%- if cookiecutter.lowering == "ffi" %}
    # On the CPU, a custom call to this project's handler; elsewhere StableHLO.
    platforms={"cpu": rf"custom_call @{TARGET}\b", "cuda": "", "tpu": ""},
    export_checks=(export.DisabledSafetyCheck.custom_call(TARGET),),
{%- else %}
    # Plain StableHLO on every platform: the module holds no custom call.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
{%- endif %}
    extra_collectives={
{%- if cookiecutter.lowering == "ffi" %}
        # A split row goes whole to the C++ handler (its Shardy rule asks for it).
        "jit-auto-n": "rows split along n are gathered for the C++ handler",
{%- if cookiecutter.api == "hijax" %}
        # jax.ffi.ffi_call takes no MLIR attributes, so the custom call has no
        # Shardy rule (api=extend attaches one): its result is replicated.
        "jit-auto-b": "the result is gathered: give jit out_shardings, or use an explicit mesh",
{%- endif %}
{%- else %}
        # Each shift trades one boundary element with each neighbour.
        "jit-auto-n": "a halo exchange (collective-permute) of one element per shard boundary",
{%- endif %}
    },
    refuse={"jit-explicit-n": SHARDED_ROW, "jit-explicit-set-mesh-n": SHARDED_ROW},
)
