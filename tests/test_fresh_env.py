"""The slow, honest check: baked projects install into a brand-new virtual
environment from their own declared dependencies, and their tests pass there."""

import pytest
from conftest import fresh_venv

from jax_ladder.rungs import by_name
from jax_ladder.scaffold import scaffold

# Representative pure-Python cases, installed one after the other into one new
# environment (installing JAX once is most of the cost). The export project
# goes first: it needs flatbuffers, which jax does not bring, so its tests
# prove its pyproject declares it. test_templates.py covers every combination
# faster; test_ffi_rung.py does the same for the compiled rung.
FRESH_CASES = [
    ("export", {"platforms": "cpu,cuda,tpu"}),
    ("custom-vjp", {"rule": "vjp"}),
]


@pytest.mark.slow
def test_generated_projects_install_and_pass_in_a_fresh_venv(tmp_path):
    run = None
    for rung_name, options in FRESH_CASES:
        project = scaffold(by_name(rung_name), tmp_path / rung_name, options)
        run = run or fresh_venv(tmp_path / "venv", cwd=project)
        run("-m", "pip", "install", "--quiet", "-e", ".[test]", cwd=project)
        # Nothing of the kit leaks in: the project must stand alone.
        run(
            "-c",
            "import importlib.util, sys; "
            "sys.exit(importlib.util.find_spec('jax_ladder') is not None)",
        )
        result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
        assert " passed" in result.stdout, rung_name
        run("benchmarks/bench.py", "--quick", cwd=project)
