{% if cookiecutter.example == "none" -%}
"""The plain-JAX reference: the correctness oracle for the custom rule.

TODO: your op's formula, the obvious way, differentiated by JAX's own autodiff.
Keep it independent of {{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one
cannot hide in the other. tests/test_reference.py checks it against the float64
oracle that tests/op_spec.py declares.
"""

import jax


def {{ cookiecutter.op_name }}_reference(x: jax.Array) -> jax.Array:
    """TODO: the same computation as {{ cookiecutter.op_name }}, in plain JAX."""
    return x * 1
{%- else -%}
"""The plain-JAX reference: the correctness oracle for the custom rule.

It is the obvious formula, differentiated by JAX's own autodiff. Keep it
independent of {{ cookiecutter.op_name }}.py (no shared helpers), so a bug in one cannot
hide in the other. The tests check it against float64 NumPy.

Its gradient is NaN wherever two points coincide: that is the bug the custom
rule fixes, so only compare gradients with it at points that do not coincide.
"""

import jax
import jax.numpy as jnp


def {{ cookiecutter.op_name }}_reference(x: jax.Array, y: jax.Array) -> jax.Array:
    """Euclidean distances between the rows of x (n, d) and y (m, d), shape (n, m)."""
    diff = x[:, None, :] - y[None, :, :]
    return jnp.sqrt(jnp.sum(diff * diff, axis=-1))
{%- endif %}
