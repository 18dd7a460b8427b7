"""The ffi skeleton adapted to ops of other shapes than the worked example's
(issue 40): an element-wise op without attributes, whose split last axis
stays split (no gather declared, no extra collectives), and a row-wise op
with two attributes, one of which its backward needs. Each bakes the
skeleton (example=none) under the op's name, writes only the files marked
yours or declaration, and runs the whole generated suite (see
tests/test_adapt.py). The ops live in tests/adapted/ffi-skeleton/<op>/: a
recipe.toml (the options, why this op) and files/.
"""

import tomllib

import pytest
from conftest import REPO, battery
from test_adapt import adapt_and_run

from jax_ladder.rungs import available

(FFI,) = [rung for rung in available() if rung.name == "ffi"]
SHAPES = REPO / "tests" / "adapted" / "ffi-skeleton"
OPS = sorted(p.name for p in SHAPES.iterdir() if p.is_dir())


def recipe_of(op: str) -> dict:
    return tomllib.loads((SHAPES / op / "recipe.toml").read_text())


def test_the_shapes_cover_no_attribute_and_several():
    """One op per shape the issue names: none of them the skeleton's own
    (a row-wise op with one attribute)."""
    assert {"silu", "scaled_norm"} <= set(OPS)
    for op in OPS:
        assert recipe_of(op)["options"]["example"] == "none", op


def test_an_element_wise_op_declares_no_gather():
    """The element-wise op's declaration has no extra collectives: its split
    last axis must need none."""
    op_spec = (SHAPES / "silu" / "files" / "tests" / "op_spec.py").read_text()
    kernels = (SHAPES / "silu" / "files" / "csrc" / "silu_kernels.h").read_text()
    assert "extra_collectives" not in op_spec
    assert "kNeedsWholeRows = false" in kernels
    assert "std::array<const char*, 0> kAttributeNames" in kernels


@pytest.mark.slow
@battery(FFI)
@pytest.mark.parametrize("op", OPS)
def test_the_skeleton_adapts_to_another_shape(tmp_path, op):
    adapt_and_run(tmp_path, FFI, recipe_of(op), SHAPES / op / "files")
