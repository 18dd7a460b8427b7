"""The declaration of the op: its signature, its float64 oracle and its
tolerances, from which tests/conformance/ builds every transformation x
sharding x platform cell (tests/test_conformance.py) and the README's support
table (tests/support_table.py).
{%- if cookiecutter.example == "none" %}

TODO: declare your op here. Name the arguments and their axes, the sizes the
cells use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead. Then `python tests/support_table.py`.
{%- else %}

Adapting the starter to your own op: change this file, the op and its
reference, not the conformance module. Name the arguments and their axes, the
sizes the cells use, which axes are batch-like (vmap over them, shard them with
no communication), and for each cell the op does not support, the error it
raises and what to use instead.
{%- endif %}
"""
{%- if cookiecutter.example != "none" or cookiecutter.api == "hijax" or cookiecutter.lowering == "ffi" %}
{# (a blank line before the third-party imports, where there are any) #}
{%- endif %}
{%- if cookiecutter.example != "none" %}
import numpy as np
{%- endif %}
{%- if cookiecutter.api == "hijax" %}
import pytest
{%- endif %}
{%- if cookiecutter.lowering == "ffi" %}
from jax import export
{%- endif %}
{%- if cookiecutter.api == "hijax" %}
from jax.experimental import hijax

# api=hijax needs JAX 0.11 (HiPrim): under 0.10 the package refuses to import,
# which tests/test_jax_api_surface.py checks; the tests built from this skip.
if not hasattr(hijax, "HiPrim"):
    pytest.skip("api=hijax needs JAX 0.11 or newer", allow_module_level=True)

# isort: split
{%- endif %}

from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_reference,
)
{%- if cookiecutter.lowering == "ffi" %}
from {{ cookiecutter.package_name }}.ffi_target import TARGET
{%- endif %}

from compare import Ulps
{%- if cookiecutter.example == "none" %}
from conformance import Arg, {% if cookiecutter.lowering == "ffi" %}Collectives, {% endif %}OpSpec
{%- else %}
from conformance import Arg, Collectives, OpSpec, Refuse
{%- endif %}
{%- if cookiecutter.lowering == "ffi" %}

# A lower-<platform> marker: the whole module holds no custom call.
NO_CUSTOM_CALL = r"\A(?![\s\S]*custom_call)"
{%- endif %}
{%- if cookiecutter.example == "none" %}

# TODO: how far your op may be from the oracle, in ulps (tests/compare.py),
# each count with the reason for it. The identity is exact: 0.
VALUES = Ulps(at_value=0)
GRADIENTS = Ulps(at_value=0)
{%- else %}

# How far the op may be from the oracle, in ulps (tests/compare.py). Each
# entry of the product, and of each gradient (the transposed band), is at most
# three products and two additions, whose terms may cancel: a rounding of
# about half an ulp of the largest term at each step, so a few ulps of the
# array's largest entry, not of each entry. Measured at most 1.2 (float32); 3.
VALUES = Ulps(at_value=0, at_scale=3)
GRADIENTS = Ulps(at_value=0, at_scale=3)
# Gradients of a nonlinear loss of the product (sin, tanh): the product's own
# rounding moves the cotangent cos(y) too, by up to the largest |y| times its
# ulp. Measured at most 7.3 ulps of the largest entry (float64); 16.
THROUGH_A_LOSS = Ulps(at_value=0, at_scale=16)


def matvec_f64(dl, d, du, x):
    """The product in float64 NumPy, row by row of the band: an oracle that
    shares no code, and no dtype, with the op or the reference."""
    dl, d, du, x = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x))
    y = d * x
    y[..., 1:] += dl[..., 1:] * x[..., :-1]
    y[..., :-1] += du[..., :-1] * x[..., 1:]
    return y


def matvec_vjp_f64(dl, d, du, x, cotangent):
    """Gradients of sum(cotangent * y) with respect to (dl, d, du, x)."""
    dl, d, du, x, ct = (np.asarray(a, dtype=np.float64) for a in (dl, d, du, x, cotangent))
    g_dl, g_du = np.zeros_like(ct), np.zeros_like(ct)
    g_dl[..., 1:] = ct[..., 1:] * x[..., :-1]
    g_du[..., :-1] = ct[..., :-1] * x[..., 1:]
    g_x = d * ct
    g_x[..., :-1] += dl[..., 1:] * ct[..., 1:]
    g_x[..., 1:] += du[..., :-1] * ct[..., :-1]
    return g_dl, ct * x, g_du, g_x


# The primitive works along the last axis, n: sharding it would split a row's
# neighbours between devices, so the abstract evaluation refuses it.
SHARDED_ROW = Refuse(
    TypeError,
    r"{{ cookiecutter.op_name }}: the last axis .* is sharded",
    "refused: the last axis couples neighbours; shard the batch axis, or reshard first",
)

{%- if cookiecutter.example != "none" and cookiecutter.lowering != "ffi" %}
# Each shift trades one boundary element with each neighbour.
HALO = Collectives(
    "a halo exchange (collective-permute) of one element per shard boundary",
    forward={"collective-permute": 2},
    gradient={"collective-permute": 6},
)
{%- endif %}

FINITE_PRODUCTS = (-1e18, 1e18)
{%- endif %}

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
{%- if cookiecutter.example == "none" %}
    # TODO: a float64 NumPy oracle of your own (same signature), or None: the
    # reference run in float64.
    oracle=None,
    args=(Arg("x", ("b", "n")),),
{%- else %}
    oracle=matvec_f64,
    # Three products of two arguments, summed, must stay finite in float32:
    # every argument below about 1e19. The hard-input cells stay within 1e18.
    args=(
        Arg("dl", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("d", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("du", ("b", "n"), domain=FINITE_PRODUCTS),
        Arg("x", ("b", "n"), domain=FINITE_PRODUCTS),
    ),
{%- endif %}
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
{%- else %}
    # Plain StableHLO on every platform: the module holds no custom call.
    platforms={"cpu": "", "cuda": "", "tpu": ""},
{%- endif %}
{%- if cookiecutter.example != "none" or cookiecutter.lowering == "ffi" %}
    # Counted on the cells' mesh of 4 devices.
    extra_collectives={
{%- if cookiecutter.lowering == "ffi" and cookiecutter.example == "none" %}
        # The custom call's Shardy rule keeps the last axis whole, in every
        # mode, and inside a shard_map that leaves n's axis free.
        **dict.fromkeys(
            ("jit-*-n", "shard-map-partial-b-free-n"),
            Collectives(
                "rows split along n are gathered for the C++ handler",
                forward={"all-gather": 1},
                gradient={"all-gather": 1},
            ),
        ),
{%- elif cookiecutter.lowering == "ffi" %}
        # A split row goes whole to the C++ handler (its Shardy rule asks for
        # it), under jit and inside a shard_map that leaves n's axis free.
        **dict.fromkeys(
            ("jit-auto-n", "shard-map-partial-b-free-n"),
            Collectives(
                "rows split along n are gathered for the C++ handler",
                forward={"all-gather": 4},
                gradient={"all-gather": 4, "collective-permute": 4},
            ),
        ),
{%- else %}
        # Each shift trades one boundary element with each neighbour.
        "jit-auto-n": HALO,
        # The same with n split over the automatic axis a shard_map leaves
        # free, where the reference gathers (3 all-gathers and 1 all-reduce
        # forward, 1 and 1 in the gradient).
        "shard-map-partial-b-free-n": HALO,
{%- endif %}
{%- if cookiecutter.lowering == "ffi" and cookiecutter.api == "hijax" %}
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
{%- endif %}
{%- if cookiecutter.example != "none" %}
    refuse={
        "jit-explicit-n": SHARDED_ROW,
        "jit-explicit-set-mesh-n": SHARDED_ROW,
        "grad-grad-explicit-n": SHARDED_ROW,
        "grad-grad-explicit-vmap-n": SHARDED_ROW,
    },
{%- endif %}
)
