"""The JAX versions the kit supports: the one definition.

Each template's cookiecutter.json passes JAX_SPEC on as the private variable
`_jax_spec`, which its pyproject.toml pins. tests/test_versions.py holds that
and every other copy to these values: the kit's pyproject.toml,
scripts/_env.sh, the templates' CI matrices, the README and reference pages.
"""

# Widen only after the kit's tests pass on the new versions.
JAX_SPEC = ">=0.12,<0.13"
# The version the kit's tests and the measurements in the docs ran on.
JAX_TESTED = "0.12.0.1"
