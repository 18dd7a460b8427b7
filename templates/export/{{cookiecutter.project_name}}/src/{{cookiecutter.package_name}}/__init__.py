"""A JAX model exported with jax.export: shape-polymorphic, serialized, reloadable."""

from {{ cookiecutter.package_name }}.artifact import Artifact, export_model, load, save
from {{ cookiecutter.package_name }}.reference import init_params, predict

__all__ = ["Artifact", "export_model", "init_params", "load", "predict", "save"]
