{%- set names = ["Artifact", "export_model", "init_params", "load", "save", cookiecutter.op_name] -%}
"""A JAX model exported with jax.export: shape-polymorphic, serialized, reloadable."""

from .artifact import Artifact, export_model, load, save
from .reference import {{ [cookiecutter.op_name, "init_params"] | sort | join(", ") }}

__all__ = [
{%- for name in names | sort(case_sensitive=True) %}
    "{{ name }}",
{%- endfor %}
]
