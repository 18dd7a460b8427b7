"""A compiled project's release wheel works on every JAX its pin admits (issue 39).

An FFI handler built against one jaxlib's headers declares that FFI API
version, and an older jaxlib refuses it ("the handler's API version (0.5) is
incompatible with the framework's API version (0.3)"): a module loads in the
jaxlib it was built against and in newer ones, never in older ones. So each
compiled project (ffi, internals with lowering=ffi) is built here the way its
release workflow builds it (`python -m build`: build isolation, so the
project's build-system.requires decides the headers, as under cibuildwheel),
its wheel is installed `--no-deps` into a fresh environment holding the
window's oldest JAX, and another holding its newest, and cibuildwheel's test
command runs there from the copy cibuildwheel makes (its `test-sources`, in a
folder without src/). Slow: two environments and a compiled build per
project, the whole suite twice.
"""

import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest
from conftest import battery, fresh_venv

from jax_ladder.rungs import by_name, template_dir
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_OLDEST, JAX_WINDOW

# The release path: the full tier only (tests/tiers.py).
pytestmark = pytest.mark.release_path

# Every template that can generate a compiled project, with the options that
# make it compiled (the rest at their defaults).
COMPILED = {"ffi": {}, "internals": {"lowering": "ffi"}}


def test_every_template_with_compiled_code_is_listed():
    # A template ships C++ where its project folder has a CMakeLists.txt
    # (docs/architecture.md); each such template is tested below.
    templates = template_dir(by_name("ffi")).parent
    compiled = {
        t.name
        for t in templates.iterdir()
        if (t / "{{cookiecutter.project_name}}" / "CMakeLists.txt").exists()
    }
    assert compiled == set(COMPILED), compiled


@pytest.mark.slow
@pytest.mark.parametrize(
    "rung_name",
    [pytest.param(name, marks=battery(by_name(name))) for name in COMPILED],
)
def test_release_wheel_passes_its_tests_on_the_oldest_and_newest_jax(
    rung_name, tmp_path, monkeypatch
):
    project = scaffold(by_name(rung_name), tmp_path / "bake", dict(COMPILED[rung_name]))
    config = tomllib.loads((project / "pyproject.toml").read_text())
    wheel_test = config["tool"]["cibuildwheel"]

    # 1. Built as cd.yml builds it: the sdist, then the wheel from it, each in
    # an isolated environment made from build-system.requires.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    dist = tmp_path / "dist"
    command = [sys.executable, "-m", "build", "--outdir", str(dist), str(project)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (wheel,) = dist.glob("*.whl")

    # 2. The copy cibuildwheel makes before its test command: test-sources,
    # away from src/.
    copy = tmp_path / "installed"
    for source in wheel_test["test-sources"]:
        copier = shutil.copytree if (project / source).is_dir() else shutil.copy2
        copier(project / source, copy / source)
    assert not (copy / "src").exists()
    test_command = shlex.split(wheel_test["test-command"])
    assert test_command[0] == "pytest", test_command
    extras = config["project"]["optional-dependencies"]
    test_requirements = [r for extra in wheel_test["test-extras"] for r in extras[extra]]
    runtime = [r for r in config["project"]["dependencies"] if not r.startswith("jax")]

    # 3. Each end of the window: a fresh environment with that JAX, the
    # wheel installed beside it without letting pip choose another JAX.
    outcomes = {}
    for version in (JAX_OLDEST, JAX_WINDOW[-1]):
        run = fresh_venv(tmp_path / f"venv-{version}", cwd=copy)
        pins = [f"jax=={version}", f"jaxlib=={version}"]
        run("-m", "pip", "install", "--quiet", *pins, *runtime, *test_requirements)
        run("-m", "pip", "install", "--quiet", "--no-deps", str(wheel))
        installed = run("-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)")
        assert installed.stdout.split() == [version, version], installed.stdout
        python = str(tmp_path / f"venv-{version}" / "bin" / "python")
        result = subprocess.run(
            [python, "-m", *test_command, "-p", "no:cacheprovider"],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        summary = (result.stdout.strip().splitlines() or [""])[-1]
        outcomes[version] = (result.returncode, summary, result.stdout[-6000:])
    failed = {v: o for v, o in outcomes.items() if o[0] != 0}
    assert not failed, "\n\n".join(
        f"JAX {v}: exit {code}, {summary}\n{tail}" for v, (code, summary, tail) in failed.items()
    )
    # And CMake said so: the headers were the oldest jaxlib's.
    log = built.stdout + built.stderr
    assert f"from jaxlib {JAX_OLDEST}" in log, log[-4000:]
