"""The plain-JAX reference: the correctness oracle for the primitive.

TODO: your op's formula in plain JAX. Keep it obvious, even slow, and
independent of {{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one cannot hide
in the other: the tests compare the primitive with it in float64 (values and,
through JAX's autodiff of it, gradients). The skeleton's op is the identity.
"""

import jax


def {{ cookiecutter.op_name }}_reference(x: jax.Array) -> jax.Array:
    """TODO: what your op computes (the skeleton: x, unchanged)."""
    return x
