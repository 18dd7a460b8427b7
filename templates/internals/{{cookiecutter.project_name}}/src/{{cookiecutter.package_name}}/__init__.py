"""The tridiagonal matrix-vector product as a new JAX primitive, with its own rules."""

from .reference import tridiagonal_matvec_reference
{%- if cookiecutter.api == "hijax" %}
from .tridiagonal_matvec import TridiagonalMatvec, tridiagonal_matvec

__all__ = ["TridiagonalMatvec", "tridiagonal_matvec", "tridiagonal_matvec_reference"]
{%- else %}
from .tridiagonal_matvec import tridiagonal_matvec, tridiagonal_matvec_p

__all__ = ["tridiagonal_matvec", "tridiagonal_matvec_p", "tridiagonal_matvec_reference"]
{%- endif %}
