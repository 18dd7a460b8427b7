"""The JAX extension points this project relies on, by name: when a JAX release
moves one, this fails first and says which (see the README's API table)."""

import importlib

import pytest

USED = {
{%- if cookiecutter.api == "hijax" %}
    "jax.experimental.hijax": [
        "HiPrim",
        "GradAccum",
        "instantiate_zeros",
        "bdims_at_front",
        "vjp_from_jvp",
        "linearize_from_jvp",
    ],
    "jax.core": ["ShapedArray"],
{%- else %}
    "jax.extend.core": ["Primitive"],
    "jax.core": ["ShapedArray"],
    "jax.interpreters.mlir": [
        "lower_fun",
        "register_lowering",
{%- if cookiecutter.lowering == "ffi" %}
        "ir",
{%- endif %}
    ],
    "jax.interpreters.ad": [
        "primitive_jvps",
        "primitive_transposes",
        "Zero",
        "instantiate_zeros",
        "is_undefined_primal",
    ],
    "jax.interpreters.batching": ["primitive_batchers", "bdim_at_front"],
{%- endif %}
{%- if cookiecutter.lowering == "ffi" %}
    "jax.ffi": [
        "register_ffi_target",
        "register_ffi_target_as_batch_partitionable",
        "ffi_lowering",
        "ffi_call",
    ],
{%- if cookiecutter.api == "hijax" %}
    "jax.interpreters.mlir": ["ir"],
    "jax.experimental.xla_metadata": ["set_xla_metadata"],
{%- endif %}
{%- endif %}
}


@pytest.mark.parametrize(("module", "names"), USED.items(), ids=list(USED))
def test_extension_points_exist(module, names):
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"{module} no longer has {missing}: see JAX's changelog"
