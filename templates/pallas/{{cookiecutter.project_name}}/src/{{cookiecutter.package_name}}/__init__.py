"""{% if cookiecutter.example == "none" %}{{ cookiecutter.op_name }} as a Pallas kernel, differentiable, with its plain-JAX reference and
its form for jit with Auto shardings.{% else %}A Pallas matmul with a fused bias + GELU epilogue, differentiable.{% endif %}"""

from .partitioning import {{ cookiecutter.op_name }}_partitioned
from .reference import {{ cookiecutter.op_name }}_reference

# isort: split
# (The op's module last, whatever its name sorts as.)
from .{{ cookiecutter.op_name }} import BACKWARD, IMPLEMENTATION_ENV, {{ cookiecutter.op_name }}

__all__ = [
    "BACKWARD",
    "IMPLEMENTATION_ENV",
    "{{ cookiecutter.op_name }}",
    "{{ cookiecutter.op_name }}_partitioned",
    "{{ cookiecutter.op_name }}_reference",
]
