"""The declaration of the op: its signature, its float64 oracle and its
tolerances, from which tests/conformance.py builds every transformation x
sharding x platform cell (tests/test_conformance.py) and the README's support
table (tests/support_table.py).

TODO: declare your op here. Name the arguments and their axes, the sizes the
cells use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead. Then `python tests/support_table.py`.
"""
{%- if cookiecutter.api == "hijax" %}

import pytest
{%- if cookiecutter.lowering == "ffi" %}
from jax import export
{%- endif %}
from jax.experimental import hijax

# api=hijax needs JAX 0.11 (HiPrim): under 0.10 the package refuses to import,
# which tests/test_jax_api_surface.py checks; the tests built from this skip.
if not hasattr(hijax, "HiPrim"):
    pytest.skip("api=hijax needs JAX 0.11 or newer", allow_module_level=True)

# isort: split
{%- elif cookiecutter.lowering == "ffi" %}

from jax import export
{%- endif %}

from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_reference,
)
{%- if cookiecutter.lowering == "ffi" %}
from {{ cookiecutter.package_name }}.ffi_target import TARGET
{%- endif %}

from compare import Ulps
from conformance import Arg, {% if cookiecutter.lowering == "ffi" %}Collectives, {% endif %}OpSpec
{%- if cookiecutter.lowering == "ffi" %}

# A lower-<platform> marker: the whole module holds no custom call.
NO_CUSTOM_CALL = r"\A(?![\s\S]*custom_call)"
{%- endif %}

# TODO: how far your op may be from the oracle, in ulps (tests/compare.py),
# each count with the reason for it. The identity is exact: 0.
VALUES = Ulps(at_value=0)
GRADIENTS = Ulps(at_value=0)

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
    # TODO: a float64 NumPy oracle of your own (same signature), or None: the
    # reference run in float64.
    oracle=None,
    args=(Arg("x", ("b", "n")),),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 12},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
{%- if cookiecutter.lowering == "ffi" %}
    # On the CPU, a custom call to this project's handler; elsewhere the
    # StableHLO rule, a program of its own: a module with no custom call.
    platforms={"cpu": rf"custom_call @{TARGET}\b", "cuda": NO_CUSTOM_CALL, "tpu": NO_CUSTOM_CALL},
    export_checks=(export.DisabledSafetyCheck.custom_call(TARGET),),
    # Counted on the cells' mesh of 4 devices.
    extra_collectives={
        # The custom call's Shardy rule keeps the last axis whole, in every mode.
        "jit-*-n": Collectives(
            "rows split along n are gathered for the C++ handler",
            forward={"all-gather": 1},
            gradient={"all-gather": 1},
        ),
{%- if cookiecutter.api == "hijax" %}
        # jax.ffi.ffi_call takes no MLIR attributes, so the custom call has no
        # Shardy rule (api=extend attaches one): its result is replicated.
        "jit-auto-b": Collectives(
            "the result is gathered: give jit out_shardings, or use an explicit mesh",
            forward={"all-gather": 1},
            gradient={"all-gather": 1},
        ),
        # The same inside shard_map over "x": the batch's split over the automatic
        # "y" has no rule to follow through the custom call.
        "shard-map-partial-b": Collectives(
            "the split over the automatic axis is gathered: go manual over all, or use api=extend",
            forward={"all-gather": 1},
            gradient={"all-gather": 1},
        ),
{%- endif %}
    },
{%- else %}
    # Plain StableHLO on every platform: the module holds no custom call.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
{%- endif %}
)
