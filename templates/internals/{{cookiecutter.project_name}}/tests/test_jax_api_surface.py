"""The JAX extension points this project relies on, by name: when a JAX release
moves one, this fails first and says which (see the README's API table)."""

import importlib
{%- if cookiecutter.api == "hijax" %}
import sys

import jax
import pytest
{%- else %}

import pytest
{%- endif %}

USED = {
{%- if cookiecutter.api == "hijax" %}
    "jax.experimental.hijax": [
        "HiPrim",
        "GradAccum",
        "instantiate_zeros",
        "vjp_from_jvp",
        "linearize_from_jvp",
    ],
    "jax.core": ["ShapedArray"],
    "jax.interpreters.batching": ["bdim_at_front"],
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


{%- if cookiecutter.api == "hijax" %}
# api=hijax needs JAX 0.11 or newer: JAX 0.10's HiJAX has no HiPrim (an earlier
# API, HiPrimitive), and the package refuses to import there (checked below).
HAS_HIPRIM = jax.__version_info__ >= (0, 11)
{%- endif %}


@pytest.mark.parametrize(("module", "names"), USED.items(), ids=list(USED))
def test_extension_points_exist(module, names):
{%- if cookiecutter.api == "hijax" %}
    if module == "jax.experimental.hijax" and not HAS_HIPRIM:
        pytest.skip(f"api=hijax needs JAX 0.11 or newer, not {jax.__version__}")
{%- endif %}
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"{module} no longer has {missing}: see JAX's changelog"
{%- if cookiecutter.api == "hijax" %}


def test_the_package_refuses_a_jax_without_hiprim(monkeypatch):
    """Under JAX 0.10 (or any JAX without HiPrim) the import fails with the
    version it needs, not with an AttributeError from the class statement.
    From JAX 0.11 on, HiPrim is hidden and the package imported afresh."""
    from jax.experimental import hijax

    package = "{{ cookiecutter.package_name }}"
    monkeypatch.delattr(hijax, "HiPrim", raising=False)
    for name in (package, f"{package}.{{ cookiecutter.op_name }}"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError, match=r"api=hijax needs JAX 0\.11 or newer .*HiPrim"):
        importlib.import_module(package)
{%- endif %}
