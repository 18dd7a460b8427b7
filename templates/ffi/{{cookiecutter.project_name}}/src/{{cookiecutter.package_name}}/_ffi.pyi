"""The compiled extension module _ffi (csrc/module.cc), for type checkers:
they read this stub, so they check rowwise.py without a build. Update it
with csrc/module.cc (`python -m nanobind.stubgen -m PACKAGE._ffi` on a build
prints what nanobind sees)."""

from typing_extensions import CapsuleType

op_name: str
attributes: list[str]  # the names of the handlers' attributes (kAttributeNames)
needs_whole_rows: bool  # a row must be whole on one device (kNeedsWholeRows)

def cpu_targets() -> dict[str, CapsuleType]:
    """The CPU handlers by direction ("forward", "backward"), as PyCapsules."""

def cuda_targets() -> dict[str, CapsuleType]:
    """The CUDA handlers by direction; empty in a build without CUDA."""
