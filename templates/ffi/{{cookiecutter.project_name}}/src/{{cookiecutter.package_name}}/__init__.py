"""{% if cookiecutter.example == "rms_norm" %}RMS normalisation{% else %}The op {{ cookiecutter.op_name }}{% endif %} through a C++{% if cookiecutter.cuda == "yes" %}/CUDA{% endif %} XLA FFI handler, differentiable."""
{#- The imports and __all__ sorted as ruff wants them, whatever the op's name. #}
{%- set op = cookiecutter.op_name %}
{%- set imports = {
    "reference": "from .reference import " ~ op ~ "_reference",
    "rowwise": "from .rowwise import BACKWARD, FORWARD, TARGETS, cuda_available, for_export",
    op: "from ." ~ op ~ " import " ~ op,
} %}
{%- set names = ["cuda_available", "for_export", op, op ~ "_reference"] | sort %}
{% for key in imports | sort %}
{{ imports[key] }}
{%- endfor %}

__all__ = [
    "BACKWARD",
    "FORWARD",
    "TARGETS",
{%- for name in names %}
    "{{ name }}",
{%- endfor %}
]
