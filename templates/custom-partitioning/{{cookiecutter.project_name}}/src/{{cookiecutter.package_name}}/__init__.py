"""{{ cookiecutter.op_name }}, partitioned shard by shard (jax custom_partitioning), and its
plain-JAX reference."""

{% if cookiecutter.op_name < "reference" -%}
from .{{ cookiecutter.op_name }} import {{ cookiecutter.op_name }}
from .reference import {{ cookiecutter.op_name }}_reference
{%- else -%}
from .reference import {{ cookiecutter.op_name }}_reference
from .{{ cookiecutter.op_name }} import {{ cookiecutter.op_name }}
{%- endif %}

__all__ = ["{{ cookiecutter.op_name }}", "{{ cookiecutter.op_name }}_reference"]
