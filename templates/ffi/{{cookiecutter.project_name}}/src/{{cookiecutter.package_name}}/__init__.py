"""RMS normalisation through a C++{% if cookiecutter.cuda == "yes" %}/CUDA{% endif %} XLA FFI handler, differentiable."""

from .reference import rms_norm_reference
from .rms_norm import BACKWARD, FORWARD, TARGETS, cuda_available, rms_norm

__all__ = ["BACKWARD", "FORWARD", "TARGETS", "cuda_available", "rms_norm", "rms_norm_reference"]
