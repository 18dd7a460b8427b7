"""Every generated project type-checks: mypy, run in the baked project with the
project's own configuration (strict, `files = ["src"]`), passes on the src/ of
every option combination, and the package says it is typed (py.typed).

Each combination is baked and checked once, with one mypy cache per xdist
worker: the first run parses JAX's and NumPy's annotations, which is most of
the cost, and the others reuse them. Every code option changes src/, so no
combination duplicates another's check. FFI projects are not built: mypy
reads the compiled module's stub, src/<package>/_ffi.pyi.
"""

import re
import subprocess
import sys

import pytest
from conftest import EXAMPLE_AND_SKELETON, quick_or_battery

from jax_ladder.scaffold import scaffold


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("mypy-cache")


# The default combination in both tiers, the others in their template's battery.
TYPE_CHECKED = [
    pytest.param(*p.values, id=p.id, marks=quick_or_battery(*p.values[0]))
    for p in EXAMPLE_AND_SKELETON
]


@pytest.mark.parametrize("combination", TYPE_CHECKED)
def test_src_passes_strict_mypy(combination, tmp_path, mypy_cache):
    rung, combo = combination
    project = scaffold(rung, tmp_path, combo)
    (package,) = (p.parent for p in project.glob("src/*/__init__.py"))
    assert (package / "py.typed").is_file()
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Every module of the package was checked: the configuration found them.
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    modules = [*package.glob("*.py"), *package.glob("*.pyi")]
    assert checked, result.stdout
    assert int(checked.group(1)) == len(modules), result.stdout
