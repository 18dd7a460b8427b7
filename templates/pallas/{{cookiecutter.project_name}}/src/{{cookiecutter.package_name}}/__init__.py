"""A Pallas matmul with a fused bias + GELU epilogue, differentiable."""

from .fused_matmul import BACKWARD, IMPLEMENTATION_ENV, fused_matmul
from .partitioning import fused_matmul_partitioned
from .reference import fused_matmul_reference

__all__ = [
    "BACKWARD",
    "IMPLEMENTATION_ENV",
    "fused_matmul",
    "fused_matmul_partitioned",
    "fused_matmul_reference",
]
