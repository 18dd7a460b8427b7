"""The slow, honest check: a baked project installs into a brand-new virtual
environment from its own declared dependencies, and its tests pass there."""

import pytest
from conftest import fresh_venv

from jax_ladder.rungs import by_name
from jax_ladder.scaffold import scaffold

# A few representative cases; test_templates.py covers every combination faster.
FRESH_CASES = [
    ("custom-vjp", {"rule": "vjp"}),
    ("export", {"platforms": "cpu,cuda,tpu"}),  # also proves flatbuffers is declared
]


@pytest.mark.slow
@pytest.mark.parametrize(("rung_name", "options"), FRESH_CASES, ids=lambda v: str(v))
def test_generated_project_installs_and_passes_in_a_fresh_venv(tmp_path, rung_name, options):
    project = scaffold(by_name(rung_name), tmp_path / "out", options)
    run = fresh_venv(tmp_path / "venv", cwd=project)
    run("-m", "pip", "install", "--quiet", "-e", ".[test]")
    # Nothing of the kit leaks in: the project must stand alone.
    run(
        "-c",
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('jax_ladder') is not None)",
    )
    result = run("-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert " passed" in result.stdout
    run("benchmarks/bench.py", "--quick")
