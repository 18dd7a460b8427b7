{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
{%- set op = cookiecutter.op_name -%}
{%- set skeleton = cookiecutter.example == "none" -%}
"""What is exported: the function (the model with its weights bound), its
inputs' symbolic signature, and the facts about their sizes that it needs.

artifact.py exports, saves, loads and checks whatever this module declares.
{% if skeleton %}TODO: declare your model's inputs and constraints here.{% else %}To export another model, change this module and reference.py.{% endif %}
"""

from collections.abc import Callable
from functools import partial

import jax

from .reference import FEATURES{% if seq and not skeleton %}, MAX_LEN{% endif %}, Params, {{ [cookiecutter.op_name, "init_params"] | sort | join(", ") }}

# One entry per argument, in order: its name, symbolic shape and dtype. The
# first is a float input (the one the tests differentiate). Dimension
# variables ({% if seq %}b: the batch, s: the sequence length{% else %}b: the batch{% endif %}) are >= 1, b comes first in
# every input and output, and a name used twice means the same size.
{%- if seq %}
INPUTS = (
    ("x", f"b, s, {FEATURES}", "float32"),
    ("mask", "b, s", "bool"),
)
{%- else %}
INPUTS = (("x", f"b, {FEATURES}", "float32"),)
{%- endif %}
# Facts about the dimension variables that the model needs and the exporter
# cannot infer.{% if seq and not skeleton %} Slicing the positional table to s needs s <= MAX_LEN.{% endif %}
CONSTRAINTS: tuple[str, ...] = ({% if seq and not skeleton %}f"s <= {MAX_LEN}",{% endif %})


def exported_function(params: Params | None = None) -> Callable[..., jax.Array]:
    """The model with its weights bound: they are baked into the artifact as constants."""
    return partial({{ op }}, init_params() if params is None else params)
