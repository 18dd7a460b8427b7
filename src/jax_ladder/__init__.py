"""jax-ladder: cookiecutter starters for each rung of JAX's escalation ladder."""

__version__ = "0.16.0"
