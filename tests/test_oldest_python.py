"""Every template's default project on the oldest Python the kit supports
(jax_ladder.versions.PYTHON_OLDEST), installed as its README says, in a new
environment: there pip resolves the project's JAX pin to the window's oldest
minor (JAX 0.11 and newer publish no wheels for Python 3.11), and the quick
selection of its tests passes. The rest of the suite runs on the kit's own
Python, 3.12 or newer where one is found (scripts/_env.sh), so nothing else
would notice code that only a newer Python runs.

One of the release path's checks: the full tier runs it (tests/tiers.py).
Where no such Python is found the test skips, saying so, unless
JAX_LADDER_NEED_OLDEST_PYTHON is set: the kit's release workflow installs
one and sets it, so there the check cannot be skipped.
"""

import os
import subprocess

import pytest
from conftest import battery
from packaging.specifiers import SpecifierSet

from jax_ladder import pythons
from jax_ladder.rungs import available
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_ON_PYTHON_OLDEST, PYTHON_OLDEST

# The release path: the full tier only (tests/tiers.py).
pytestmark = pytest.mark.release_path

NEED = "JAX_LADDER_NEED_OLDEST_PYTHON"


@pytest.fixture(scope="module")
def oldest_python():
    python = pythons.find_python(SpecifierSet(f"=={PYTHON_OLDEST}.*"))
    if python is None:
        message = f"no Python {PYTHON_OLDEST} found (on the PATH or among pyenv's versions)"
        if os.environ.get(NEED):
            pytest.fail(f"{message}, and {NEED} is set")
        pytest.skip(f"{message}: install one to run this check")
    return python


def run(command, cwd, timeout=1200):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "rung", [pytest.param(r, marks=battery(r), id=r.name) for r in available()]
)
def test_default_project_passes_its_quick_tests_on_the_oldest_python(
    rung, oldest_python, tmp_path, monkeypatch
):
    project = scaffold(rung, tmp_path / "bake", {})
    monkeypatch.delenv("PYTHONPATH", raising=False)  # nothing of the kit's
    run([oldest_python, "-m", "venv", tmp_path / "venv"], cwd=tmp_path)
    python = str(tmp_path / "venv" / "bin" / "python")
    # The README's steps: a current pip, then the project with its test extra.
    run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], cwd=project)
    run([python, "-m", "pip", "install", "--quiet", "-e", ".[test]"], cwd=project)
    probe = "import platform, jax; print(platform.python_version(), jax.__version__)"
    python_version, jax_version = run([python, "-c", probe], cwd=project).split()
    assert python_version.startswith(f"{PYTHON_OLDEST}."), python_version
    # JAX_ON_PYTHON_OLDEST, "0.10.x": the oldest minor's newest patch.
    assert jax_version.startswith(JAX_ON_PYTHON_OLDEST.removesuffix("x")), jax_version
    tests = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "quick"]
    output = run([python, *tests], cwd=project)
    assert " passed" in output, output[-3000:]
    assert " failed" not in output, output[-3000:]
