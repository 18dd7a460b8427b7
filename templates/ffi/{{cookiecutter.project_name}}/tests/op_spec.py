"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""

from jax import export

from {{ cookiecutter.package_name }} import FORWARD, TARGETS, rms_norm, rms_norm_reference

from conformance import Arg, OpSpec, Refuse
from oracle import GRADIENTS, VALUES, rms_norm_f64

SPEC = OpSpec(
    name="rms_norm",
    # eps is a compile-time attribute of the FFI call, not an array: the cells
    # use its default, the same in the op, the reference and the oracle.
    op=rms_norm,
    reference=rms_norm_reference,
    oracle=rms_norm_f64,
    args=(Arg("x", ("b", "n")),),
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
    # Auto axes: x's sharding is unknown while tracing, and XLA cannot split
    # a custom call it knows nothing about, so it gathers x whole first.
    extra_collectives={
        "jit-auto-*": "auto axes gather x whole: XLA cannot split a custom call; use an "
        "explicit-axes mesh (jax.make_mesh's default) or shard_map",
    },
    # The ffi_call has no forward-mode rule: jax.custom_vjp pairs the forward
    # handler with the backward one, and JAX refuses jvp of a custom_vjp.
    refuse={
        name: Refuse(
            TypeError,
            r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
            "refused: forward mode of a custom_vjp; use jax.grad or jax.vjp "
            "(jax.hessian, forward over reverse, works)",
        )
        for name in ("jvp", "linearize")
    },
)
