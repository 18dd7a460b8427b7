"""The C++ handler (csrc/) as an XLA FFI target, for the CPU lowering.

Importing this module registers the handler with XLA. The compiled module
`_ffi` hands it over as a PyCapsule; the rest is jax.ffi's public API.
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
TARGET = f"{_PREFIX}_tridiagonal_matvec"

for _name, _capsule in _ffi.cpu_targets().items():
    jax.ffi.register_ffi_target(f"{_PREFIX}_{_name}", _capsule, platform="cpu")
# XLA cannot partition a custom call it knows nothing about: it would gather
# sharded operands onto every device. Batch-partitionable: the leading axes
# (as many as the custom call's `num_batch_dims` attribute says) may be split
# across devices and each device runs the handler on its own rows.
jax.ffi.register_ffi_target_as_batch_partitionable(TARGET)
{%- if cookiecutter.api == "extend" %}


def batch_attributes(rank: int) -> dict[str, ir.Attribute]:
    """The custom call's attributes that tell XLA's partitioner how many leading
    axes are batch axes: every axis but the last, along which the product
    needs its neighbours (call it while lowering: it needs an MLIR context)."""
    return {
        "mhlo.frontend_attributes": ir.DictAttr.get(
            {"num_batch_dims": ir.StringAttr.get(str(rank - 1))}
        )
    }


def lowering(ctx: Any, *operands: Any) -> Sequence[Any]:
    """The lowering rule: a custom call to the handler (jax.ffi.ffi_lowering
    derives the operand and result types from the abstract values)."""
    rank = ctx.avals_in[3].ndim
    rule = jax.ffi.ffi_lowering(TARGET, extra_attributes=batch_attributes(rank))
    return rule(ctx, *operands)
{%- endif %}
