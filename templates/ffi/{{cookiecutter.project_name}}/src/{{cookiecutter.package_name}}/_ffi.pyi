"""The compiled extension module _ffi (csrc/module.cc), for type checkers:
they read this stub, so they check rms_norm.py without a build. Update it
with csrc/module.cc (`python -m nanobind.stubgen -m PACKAGE._ffi` on a build
prints what nanobind sees)."""

from typing_extensions import CapsuleType

def cpu_targets() -> dict[str, CapsuleType]:
    """The CPU handlers by target name, as PyCapsules."""

def cuda_targets() -> dict[str, CapsuleType]:
    """The CUDA handlers by target name; empty in a build without CUDA."""
