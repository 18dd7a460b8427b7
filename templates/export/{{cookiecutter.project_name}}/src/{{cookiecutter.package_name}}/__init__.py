"""A JAX model exported with jax.export: shape-polymorphic, serialized, reloadable."""

from .artifact import Artifact, export_model, load, save
from .reference import init_params, {{ cookiecutter.op_name }}

__all__ = ["Artifact", "export_model", "init_params", "load", "{{ cookiecutter.op_name }}", "save"]
