"""A Pallas matmul with a fused bias + GELU epilogue, differentiable."""

from .fused_matmul import BACKWARD, fused_matmul
from .reference import fused_matmul_reference

__all__ = ["BACKWARD", "fused_matmul", "fused_matmul_reference"]
