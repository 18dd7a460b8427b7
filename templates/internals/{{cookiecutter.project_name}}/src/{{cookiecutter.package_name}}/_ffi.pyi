"""The compiled extension module _ffi (csrc/module.cc), for type checkers:
they read this stub, so they check ffi_target.py without a build. Update it
with csrc/module.cc (`python -m nanobind.stubgen -m PACKAGE._ffi` on a build
prints what nanobind sees)."""

from typing_extensions import CapsuleType

def cpu_handler() -> CapsuleType:
    """The CPU handler, as a PyCapsule."""
