"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py). The other tests of the
handlers take the op, its reference, oracle and tolerances from here too.

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""

import numpy as np
from jax import export

from {{ cookiecutter.package_name }} import FORWARD, TARGETS, {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

{% if cookiecutter.example == "rms_norm" -%}
# How far the op may be from the oracle, in ulps (tests/compare.py).
# bfloat16 is computed in float32 and rounded once: that half ulp is allowed
# on top (compare.py), and the counts below are float32's.
#
# y = x * r, with r from a sum of squares accumulated in double and rounded
# once: about 1.5 ulps from the oracle, and as much again where the tests
# compare the op with the reference (measured at most 3 in float32, 4 in
# float64); 6.
VALUES = Ulps(at_value=6)
# dx = r * g - r**3 * mean(g * x) * x: two terms that cancel, so the rounding
# is on the scale of the largest entry, not of each. Measured at most 2 ulps
# of the largest entry; 4.
GRADIENTS = Ulps(at_value=0, at_scale=4)


def {{ cookiecutter.op_name }}_f64(x, eps=1e-6):
    """The independent float64 NumPy oracle: x / sqrt(mean(x**2) + eps) over the last axis."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


ORACLE = {{ cookiecutter.op_name }}_f64
{%- else -%}
# TODO: how far your op may be from the oracle, in ulps (tests/compare.py),
# and why: the identity is exact.
VALUES = Ulps(at_value=0)
GRADIENTS = Ulps(at_value=0)


# TODO: an independent float64 NumPy oracle for your op (the identity's here).
def {{ cookiecutter.op_name }}_f64(x, eps=1e-6):
    """The float64 oracle: x itself."""
    del eps
    return np.asarray(x, dtype=np.float64) * 1


ORACLE = {{ cookiecutter.op_name }}_f64
{%- endif %}

# The handlers need whole rows (rowwise.REDUCED): a row split across devices
# is gathered first. Rows split along the batch axis need no communication.
{%- if cookiecutter.example != "rms_norm" %}
# TODO: say what your reference does instead (the identity needs no communication).
{%- endif %}
SPLIT_ROWS = Collectives(
    "the row (n, which the handlers reduce over) is split: it is gathered whole, "
    "1 all-gather forward and 2 for the gradient (x and its cotangent), where the "
{%- if cookiecutter.example == "rms_norm" %}
    "reference all-reduces partial row sums (1 and 2 all-reduces)",
{%- else %}
    "reference, the identity, needs none",
{%- endif %}
    forward={"all-gather": 1},
    gradient={"all-gather": 2},
)
# The same row split over the automatic axis a shard_map manual over the batch
# leaves free: the gradient gathers x twice, for the forward call (under the
# custom_vjp's forward) and again for the backward call, which takes x as the
# op got it. (Saving x as the forward call had it, whole, and handing that to
# the backward gathered the cotangent twice instead: 3 either way, JAX 0.12.)
SPLIT_ROWS_IN_SHARD_MAP = Collectives(
    "the row (n) split over the automatic axis inside a shard_map: gathered whole, "
    "1 all-gather forward and 3 for the gradient (x for the forward call and again "
    "for the backward one, and the cotangent)",
    forward={"all-gather": 1},
    gradient={"all-gather": 3},
)

{%- if cookiecutter.example == "rms_norm" %}
# The mean of a row's squares must stay finite in float32: |x| below about
# 1e19 / sqrt(n). The hard-input cells stay within 1e18.
VALUES_SUPPORTED = (-1e18, 1e18)
{%- else %}
# TODO: the values your op supports (the hard-input cells stay within them).
VALUES_SUPPORTED = (-float("inf"), float("inf"))
{%- endif %}

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    # eps is a compile-time attribute of the FFI call, not an array: the cells
    # use its default, the same in the op, the reference and the oracle.
    op={{ cookiecutter.op_name }},
    reference={{ cookiecutter.op_name }}_reference,
    oracle=ORACLE,
    args=(Arg("x", ("b", "n"), domain=VALUES_SUPPORTED),),
    outputs=(("b", "n"),),
    sizes={"b": 8, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # Every leading axis is a batch of rows; n, the row, is reduced over.
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    # The module holds a custom call to the forward handler on every platform
    # this project has a handler for; XLA looks the handler up when it compiles.
{%- if cookiecutter.cuda == "yes" %}
    platforms={"cpu": rf"custom_call @{FORWARD}\b", "cuda": rf"custom_call @{FORWARD}\b"},
{%- else %}
    platforms={"cpu": rf"custom_call @{FORWARD}\b"},
{%- endif %}
    export_checks=tuple(export.DisabledSafetyCheck.custom_call(t) for t in TARGETS),
{%- if cookiecutter.example == "rms_norm" %}
    # A row of one element normalises to its sign, and its gradient,
    # g * eps / (x**2 + eps)**1.5, is the difference of two nearly equal
    # terms: the plain-JAX reference is 1e5 ulps off there too.
    ill_conditioned={
        "size-n-1": "a row of one element: its gradient cancels (the reference's does too)"
    },
{%- endif %}
    # Under jit, auto and explicit mesh axes alike, the FFI calls are split
    # by the sharding rule rowwise.py derives from the handlers' axes: a split
    # batch axis stays split, with no communication, gradient included.
    extra_collectives={
        "jit-auto-n": SPLIT_ROWS,
        "jit-explicit-n": SPLIT_ROWS,
        "jit-explicit-set-mesh-n": SPLIT_ROWS,
        "shard-map-partial-b-free-n": SPLIT_ROWS_IN_SHARD_MAP,
    },
    # The ffi_call has no forward-mode rule: jax.custom_vjp pairs the forward
    # handler with the backward one, and JAX refuses jvp of a custom_vjp.
    refuse={
        **{
            name: Refuse(
                TypeError,
                r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
                "refused: forward mode of a custom_vjp; use jax.grad or jax.vjp "
                "(jax.hessian, forward over reverse, works)",
            )
            for name in ("jvp", "linearize")
        },
        # rowwise.py refuses an empty row before any handler sees it.
        "size-n-0": Refuse(
            ValueError,
            r"has rows of length 0",
            "refused: a row of no elements has no norm; skip the call",
        ),
    },
)
