"""A new JAX primitive with its own rules, and its plain-JAX reference:

{{ cookiecutter.op_name }}
"""

from .reference import {{ cookiecutter.op_name }}_reference
{%- if cookiecutter.api == "hijax" %}
from .{{ cookiecutter.op_name }} import (
    {{ cookiecutter.op_name.title().replace("_", "") }},
    {{ cookiecutter.op_name }},
)

__all__ = [
    "{{ cookiecutter.op_name.title().replace("_", "") }}",
    "{{ cookiecutter.op_name }}",
    "{{ cookiecutter.op_name }}_reference",
]
{%- else %}
from .{{ cookiecutter.op_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_p,
)

__all__ = [
    "{{ cookiecutter.op_name }}",
    "{{ cookiecutter.op_name }}_p",
    "{{ cookiecutter.op_name }}_reference",
]
{%- endif %}
