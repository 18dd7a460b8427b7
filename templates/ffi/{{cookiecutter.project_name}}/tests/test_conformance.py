"""Every cell of the conformance matrix (tests/conformance.py) for the op
declared in tests/op_spec.py, and the README's table of them."""

import pytest

import support_table
from conformance import cell_names, run_cell, unknown_refusals
from op_spec import SPEC


@pytest.mark.parametrize("cell", cell_names(SPEC))
def test_cell(cell, rng):
    run_cell(SPEC, cell, rng)


def test_every_declared_refusal_names_a_cell():
    assert unknown_refusals(SPEC) == []


def test_readme_support_table_is_current():
    if not support_table.README.is_file():  # tests run against an installed wheel
        pytest.skip("no README.md beside the tests")
    block = support_table.current_block(support_table.README.read_text())
    assert block == support_table.render(SPEC), "stale: run `python tests/support_table.py`"
