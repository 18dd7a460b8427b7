"""A new JAX primitive with its own rules, and its plain-JAX reference:

{{ cookiecutter.op_name }}
"""

from .{{ cookiecutter.op_name }} import (
{%- if cookiecutter.api == "hijax" %}
    {{ cookiecutter.op_name.title().replace("_", "") }},
{%- endif %}
    {{ cookiecutter.op_name }},
{%- if cookiecutter.api == "extend" %}
    {{ cookiecutter.op_name }}_p,
{%- endif %}
)

# isort: split
# (the op's module sorts before or after reference.py, as its name falls)
from .reference import {{ cookiecutter.op_name }}_reference

__all__ = [
{%- if cookiecutter.api == "hijax" %}
    "{{ cookiecutter.op_name.title().replace("_", "") }}",
{%- endif %}
    "{{ cookiecutter.op_name }}",
{%- if cookiecutter.api == "extend" %}
    "{{ cookiecutter.op_name }}_p",
{%- endif %}
    "{{ cookiecutter.op_name }}_reference",
]
