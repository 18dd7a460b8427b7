"""Every cell of the conformance matrix (tests/conformance.py) for the op
declared in tests/op_spec.py, and the README's table of them."""

import os
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import pytest
from jax import export, lax

import support_table
from compare import Ulps
from conformance import (
    Arg,
    OpSpec,
    cell_names,
    float32_matmuls_not_highest,
    matmuls,
    narrowing_matmuls,
    run_cell,
    unknown_refusals,
)
from op_spec import SPEC


@pytest.mark.parametrize("cell", cell_names(SPEC))
def test_cell(cell, rng):
    run_cell(SPEC, cell, rng)


# XLA's float32 matmul is the platform's choice unless the program asks:
# TensorFloat-32 on NVIDIA GPUs (about 1e4 float32 ulps off). Every float32 dot
# of the reference, the oracle's formula, and of the op outside its kernels
# asks for HIGHEST, forward and gradient, so a CPU run checks the GPU's numbers.
def test_reference_matmuls_are_highest(rng):
    assert float32_matmuls_not_highest(SPEC.reference, SPEC, rng) == []


def test_op_matmuls_are_highest(rng):
    assert float32_matmuls_not_highest(SPEC.op, SPEC, rng) == []


# The reference run on the oracle's float64 inputs asks for no narrower result
# (float64 x float64 -> float32 is a GEMM no GPU library has): its dtypes
# follow its inputs.
def test_reference_keeps_float64(rng):
    assert narrowing_matmuls(SPEC.reference, SPEC, rng) == []


def test_the_matmul_checks_see_what_they_look_for():
    """Negative controls: the checks above find a matmul at the platform's
    default precision, in a jaxpr and inside an exported artifact, and a
    float64 matmul with a float32 result."""
    a = jnp.ones((4, 8), jnp.float32)
    default = jax.jit(lambda a: a @ a.T)
    artifact = export.deserialize(export.export(default)(a).serialize())
    highest = partial(jnp.matmul, precision=lax.Precision.HIGHEST)
    assert [m.precision for m in matmuls(default, a)] == ["DEFAULT"]
    assert [m.precision for m in matmuls(artifact.call, a)] == ["DEFAULT"]
    assert [m.precision for m in matmuls(lambda a: highest(a, a.T), a)] == ["HIGHEST"]
    narrow = partial(jnp.matmul, preferred_element_type=jnp.float32)
    (found,) = matmuls(lambda a: narrow(a, a.T), a.astype(jnp.float64))
    assert found.narrows


def test_the_lower_check_sees_a_program_of_another_platform(rng):
    """Negative control: an op that computes otherwise on a GPU, with no
    marker declaring its own GPU implementation, fails lower-cuda (the cells
    run here see only the CPU's program)."""

    def op(x):
        return lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)

    exact = Ulps(at_value=4)
    spec = OpSpec("op", op, jnp.sin, None, (Arg("x", ("n",)),), (("n",),), {"n": 4}, exact, exact)
    run_cell(spec, "lower-cpu", rng)
    with pytest.raises(AssertionError, match="differs from the CPU's"):
        run_cell(OpSpec(**{**spec.__dict__, "platforms": {"cuda": ""}}), "lower-cuda", rng)


def test_every_declared_refusal_names_a_cell():
    assert unknown_refusals(SPEC) == []


def test_readme_support_table_is_current():
    if not support_table.README.is_file():  # tests run against an installed wheel
        pytest.skip("no README.md beside the tests")
    block = support_table.current_block(support_table.README.read_text())
    if jax.default_backend() == "cpu":
        rendered = support_table.render(SPEC)
    else:
        # The table is the CPU's, where the README is written: a declaration may
        # refuse a cell only where it runs interpreted (tests/op_spec.py).
        rendered = subprocess.run(
            [sys.executable, "-c", RENDER],
            cwd=support_table.TESTS,
            # This process's own import path, absolute: a relative PYTHONPATH
            # (PYTHONPATH=src) would not resolve from tests/.
            env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.rstrip("\n")
    assert block == rendered, "stale: run `python tests/support_table.py`"


RENDER = "import support_table; from op_spec import SPEC; print(support_table.render(SPEC))"
