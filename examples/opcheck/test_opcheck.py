"""A few cells of each declaration in specs.py, and the outcomes run.py
reports for them (reports.md): what passes, what is refused, and the defects
the README reproduces."""

import re
import zlib

import numpy as np
import pytest
import specs

from jax_ladder.opcheck.conformance import refusal, run_cell, unknown_refusals

needs_optax = pytest.mark.skipif(
    specs.projection_simplex is None,
    reason="optax is not installed (pip install optax, or the kit's `test` extra)",
)


def run(spec, cell):
    run_cell(spec, cell, np.random.default_rng(zlib.crc32(f"{spec.name}/{cell}".encode())))


def fails(spec, cell):
    """The first line of what the cell raised."""
    with pytest.raises(Exception) as failure:  # noqa: PT011 - any failure, its message checked
        run(spec, cell)
    return str(failure.value).splitlines()[0]


@pytest.mark.parametrize("spec", specs.SPECS, ids=lambda s: s.name)
def test_every_refusal_names_a_cell(spec):
    assert unknown_refusals(spec) == []


@pytest.mark.parametrize("cell", ["eager", "jit", "vmap-new-axis", "grad-x", "hard-shifted"])
def test_softmax_passes(cell):
    run(specs.SOFTMAX, cell)


@pytest.mark.parametrize("cell", ["eager", "vmap-axis-n", "grad-x", "hard-huge"])
def test_exact_gelu_passes(cell):
    run(specs.GELU_EXACT, cell)


def test_tanh_gelu_passes_but_its_gradient_is_nan_for_huge_inputs():
    run(specs.GELU_TANH, "grad-x")
    assert "got nan" in fails(specs.GELU_TANH, "hard-huge")


@needs_optax
@pytest.mark.parametrize("cell", ["eager", "grad-x", "hard-ties", "hard-huge"])
def test_simplex_passes_in_float64(cell):
    run(specs.SIMPLEX_64, cell)


@needs_optax
def test_simplex_returns_float64_for_float32_under_x64_and_its_gradient_fails():
    assert "float64" in fails(specs.SIMPLEX, "eager")
    assert "Custom JVP rule must produce" in fails(specs.SIMPLEX, "grad-x")


@pytest.mark.parametrize("cell", ["eager", "jit", "grad-x"])
def test_pallas_matmul_on_its_blocks_passes_or_refuses_autodiff(cell):
    run(specs.MATMUL, cell)
    assert (refusal(specs.MATMUL, cell) is not None) == (cell == "grad-x")


def test_pallas_matmul_leaves_the_rows_past_its_last_block_unwritten():
    said = fails(specs.MATMUL_RAGGED, "eager")
    if specs.ON_A_TPU_HOST:
        # Whatever the output's memory held: two runs differ there, or (the
        # same leftovers twice) a row past the last block is wrong.
        assert re.search(r"differ between two runs|at index \(1[6-9], ", said), said
    else:
        assert "got nan" in said, said  # the interpreter's output starts as NaN
        assert "index (16, 0)" in said, said  # 20 rows: blocks of 8 cover rows 0..15
