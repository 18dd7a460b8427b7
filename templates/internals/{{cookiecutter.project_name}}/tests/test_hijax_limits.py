"""What defining the primitive with HiJAX (jax.experimental.hijax) costs, next
to the registries of jax.interpreters, pinned: when a JAX release changes one
of these, this fails first and says which (see the README)."""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import hijax

from {{ cookiecutter.package_name }} import TridiagonalMatvec, tridiagonal_matvec


def operands(rng, shape):
    return [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(4)]


def test_every_hiprim_binds_one_generic_primitive(rng):
    (eqn,) = jax.make_jaxpr(tridiagonal_matvec)(*operands(rng, (3, 8))).jaxpr.eqns
    # Not a primitive of its own name: code that walks jaxprs (an interpreter,
    # a cost model, a compiler pass of yours) must look for the HiPrim in the
    # equation's params. A jax.extend Primitive is the equation's primitive.
    assert eqn.primitive.name == "call_hi_primitive"
    assert isinstance(eqn.params["_prim"], TridiagonalMatvec)


def test_hiprim_has_no_lowering_rule_of_its_own():
    # JAX replaces a HiPrim by its `expand` before lowering: there is no hook
    # for a lowering rule per platform (mlir.register_lowering takes a
    # jax.extend Primitive). Per-platform code goes inside `expand`, through
    # lax.platform_dependent.
    assert "expand" in vars(TridiagonalMatvec)
    assert not any("lower" in name for name in vars(hijax.HiPrim))


class WithoutRules(TridiagonalMatvec):
    """The same primitive with its JVP and transpose taken away."""

    jvp = hijax.HiPrim.jvp
    transpose = hijax.HiPrim.transpose


def without_rules(dl, d, du, x):
    return WithoutRules(*(jax.typeof(a) for a in (dl, d, du, x)))(dl, d, du, x)


def test_a_missing_rule_fails_when_used_and_names_the_method(rng):
    args = operands(rng, (3, 8))
    assert jnp.array_equal(jax.jit(without_rules)(*args), jax.jit(tridiagonal_matvec)(*args))
    with pytest.raises(NotImplementedError, match="must implement `jvp`"):
        jax.jvp(without_rules, tuple(args), tuple(args))
