"""What defining the primitive with HiJAX (jax.experimental.hijax) costs, next
to the registries of jax.interpreters, pinned: when a JAX release changes one
of these, this fails first and says which (see the README). It works from the
declaration in tests/op_spec.py, for any op defined as a HiPrim."""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import hijax

# api=hijax needs JAX 0.11 (HiPrim): under 0.10 the package refuses to import,
# which tests/test_jax_api_surface.py checks; the rest of the suite skips.
if not hasattr(hijax, "HiPrim"):
    pytest.skip("api=hijax needs JAX 0.11 or newer", allow_module_level=True)

# isort: split
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name.title().replace("_", "") }}

from conformance import make_args
from op_spec import SPEC


def test_every_hiprim_binds_one_generic_primitive(rng):
    (eqn,) = jax.make_jaxpr(SPEC.op)(*make_args(SPEC, rng)).jaxpr.eqns
    # Not a primitive of its own name: code that walks jaxprs (an interpreter,
    # a cost model, a compiler pass of yours) must look for the HiPrim in the
    # equation's params. A jax.extend Primitive is the equation's primitive.
    assert eqn.primitive.name == "call_hi_primitive"
    assert isinstance(eqn.params["_prim"], {{ cookiecutter.op_name.title().replace("_", "") }})


def test_hiprim_has_no_lowering_rule_of_its_own():
    # JAX replaces a HiPrim by its `expand` before lowering: there is no hook
    # for a lowering rule per platform (mlir.register_lowering takes a
    # jax.extend Primitive). Per-platform code goes inside `expand`, through
    # lax.platform_dependent.
    assert "expand" in vars({{ cookiecutter.op_name.title().replace("_", "") }})
    assert not any("lower" in name for name in vars(hijax.HiPrim))


class WithoutRules({{ cookiecutter.op_name.title().replace("_", "") }}):
    """The same primitive with its JVP and transpose taken away."""

    jvp = hijax.HiPrim.jvp
    transpose = hijax.HiPrim.transpose


def without_rules(*args):
    return WithoutRules(*(jax.typeof(a) for a in args))(*args)


def test_a_missing_rule_fails_when_used_and_names_the_method(rng):
    args = make_args(SPEC, rng)
    assert jnp.array_equal(jax.jit(without_rules)(*args), jax.jit(SPEC.op)(*args))
    with pytest.raises(NotImplementedError, match="must implement `jvp`"):
        jax.jvp(without_rules, tuple(args), tuple(args))
