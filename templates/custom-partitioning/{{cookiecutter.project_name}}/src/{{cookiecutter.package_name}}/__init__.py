"""{{ cookiecutter.op_name }}, partitioned shard by shard (jax custom_partitioning), and its
plain-JAX reference."""
{#- The two imports in the order ruff sorts them, whatever the op's name. #}
{% for module in [cookiecutter.op_name, "reference"] | sort %}
from .{{ module }} import {{ cookiecutter.op_name }}{{ "_reference" if module == "reference" }}
{%- endfor %}

__all__ = ["{{ cookiecutter.op_name }}", "{{ cookiecutter.op_name }}_reference"]
