"""The op's C++ handler (csrc/) as an XLA FFI target, for the CPU lowering.

Importing this module registers the handler with XLA. The compiled module
`_ffi` hands it over as a PyCapsule; the rest is jax.ffi's public API. The
target's name derives from the op's; the handler's operands and its result
share one shape, of which every axis but the last is a batch axis.
"""
{%- if cookiecutter.api == "extend" %}

# jax.ffi's functions and the MLIR bindings carry no type annotations.
# mypy: disallow-untyped-calls=False, warn-return-any=False

from collections.abc import Sequence
from typing import Any

import jax
from jax.interpreters.mlir import ir
{%- else %}

# jax.ffi's functions carry no type annotations.
# mypy: disallow-untyped-calls=False

import jax
{%- endif %}

try:
    from . import _ffi
except ImportError as err:  # e.g. src/ on sys.path without a build
    raise ImportError(
        f"{__package__}._ffi, the compiled extension, is missing: build it with "
        "`python -m pip install -e .` (see README.md)"
    ) from err

# Target names are process-wide: prefix them with the package name so that two
# projects generated from this template can be imported together.
_PREFIX = __name__.split(".")[0]
TARGET = f"{_PREFIX}_{{ cookiecutter.op_name }}"
# The dtypes the handler computes in (csrc/); it returns an error for any
# other when the program runs.
DTYPES = ("float32", "float64")

jax.ffi.register_ffi_target(TARGET, _ffi.cpu_handler(), platform="cpu")
# XLA cannot partition a custom call it knows nothing about: it would gather
# sharded operands onto every device. Batch-partitionable: the leading axes
# (as many as the custom call's `num_batch_dims` attribute says) may be split
# across devices and each device runs the handler on its own rows.
jax.ffi.register_ffi_target_as_batch_partitionable(TARGET)
{%- if cookiecutter.api == "extend" %}


def partitioning_attributes(shape: tuple[Any, ...], count: int) -> dict[str, ir.Attribute]:
    """The custom call's attributes that tell XLA how to split it across
    devices (call it while lowering: it needs an MLIR context).

    `num_batch_dims`: XLA's partitioner may run the handler on each device's
    rows of every axis but the last, along which the op may couple its
    entries. `sdy.sharding_rule`: how shardings propagate through the call
    (Shardy, XLA's propagation, knows nothing of a custom call): each axis of
    the result is that axis of every one of the `count` operands, and the
    last axis must be replicated. Without the rule, jit with sharded inputs
    and no out_shardings gathers the result onto every device.
    """
    rank = len(shape)
    batch: dict[str, ir.Attribute] = {
        "mhlo.frontend_attributes": ir.DictAttr.get(
            {"num_batch_dims": ir.StringAttr.get(str(rank - 1))}
        )
    }
    if not all(isinstance(n, int) for n in shape):
        return batch  # a symbolic size (jax.export) has no place in the rule
    factors = "ijklmnopqrstuvwxyz"[:rank]
    axes = f"[{', '.join(factors)}]"
    sizes = ", ".join(f"{f}={n}" for f, n in zip(factors, shape, strict=True))
    operands = ", ".join([axes] * count)
    # Braces by concatenation: this file is a Jinja template.
    rule = f"({operands})->({axes}) " + "{" + sizes + "} need_replication={" + factors[-1] + "}"
    return {**batch, "sdy.sharding_rule": ir.Attribute.parse(f"#sdy.op_sharding_rule<{rule}>")}


def lowering(ctx: Any, *operands: Any) -> Sequence[Any]:
    """The lowering rule: a custom call to the handler (jax.ffi.ffi_lowering
    derives the operand and result types from the abstract values)."""
    attributes = partitioning_attributes(ctx.avals_out[0].shape, len(ctx.avals_in))
    rule = jax.ffi.ffi_lowering(TARGET, extra_attributes=attributes)
    return rule(ctx, *operands)
{%- endif %}
