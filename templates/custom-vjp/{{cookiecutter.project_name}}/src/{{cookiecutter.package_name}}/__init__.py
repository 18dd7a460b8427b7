"""Pairwise Euclidean distances with a custom {{ cookiecutter.rule.upper() }} rule."""

from .pairwise_distances import pairwise_distances
from .reference import pairwise_distances_reference

__all__ = ["pairwise_distances", "pairwise_distances_reference"]
