"""Every rung's default project can ship, and its packages are complete.

Its sdist and wheel build here and pass the checks its release workflow
(.github/workflows/cd.yml) runs. ONE new virtual environment (installing JAX
is most of the cost) installs the wheels with their declared dependencies,
and each project's tests run there from a copy of tests/ with no source tree
beside it, so they test the installed wheel; then each benchmark, and the FFI
project's documented dev loop (editable install, incremental C++ rebuild).
"""

import json
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from conftest import battery, fresh_venv

from jax_ladder.rungs import available
from jax_ladder.scaffold import scaffold

# The release path: the full tier only (tests/tiers.py).
pytestmark = pytest.mark.release_path

# cibuildwheel's test step (what it copies next to the installed wheel, the
# extras it installs, the command) comes from a compiled project's
# [tool.cibuildwheel], so this test runs what the release workflow runs. A
# pure-Python project's cd.yml tests its one wheel the same way, with these
# values written out as shell steps.
PURE_WHEEL_TEST = {
    "test-sources": ["tests", "benchmarks", "pyproject.toml"],
    "test-extras": ["test"],
    "test-command": "pytest",
}
# What runs against each installed wheel: the reference against the float64
# oracle, and the op called plainly and differentiated (two cells of the
# conformance matrix, which every project has). Every test of every option
# combination runs in test_templates.py on the same code from src/; what this
# test adds is that the wheel is complete and works once installed, which a
# missing module or extension fails at import. (The whole suites here took
# most of this test's 417 s; the release workflow still runs its own.)
INSTALLED_SMOKE = (
    "tests/test_reference.py",
    "tests/test_conformance.py::test_cell[eager]",
    "tests/test_conformance.py::test_cell[vjp]",
)
# Tests that read data the tests folder carries, run wherever they exist.
DATA_TESTS = ("tests/test_golden.py",)
# Installed and tested alone first: jax does not bring flatbuffers, so its
# tests then prove that its own dependencies declare it (the FFI project's
# test extra brings it too).
FIRST = "export"


def tool(module, *args):
    """`python -m module args` in this (the kit's) environment; its stdout."""
    command = [sys.executable, "-m", module, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def wheel_test(project: Path) -> dict:
    config = tomllib.loads((project / "pyproject.toml").read_text())
    return config.get("tool", {}).get("cibuildwheel") or PURE_WHEEL_TEST


# What every sdist carries (the pure projects' MANIFEST.in grafts the rest).
SDIST_CONTENT = (
    "src/",
    "tests/",
    "benchmarks/",
    "docs/",
    "noxfile.py",
    "pyproject.toml",
    "README.md",
    "LICENSE",
)


# Repository plumbing, which no sdist carries (a user or packager builds and
# tests from it; CI runs these from the repository).
PLUMBING = (
    ".github/",
    ".jax-ladder/",
    ".gitignore",
    ".pre-commit-config.yaml",
    ".mdformat.toml",
    ".readthedocs.yaml",
    "tools/",
)


def files_in(project: Path) -> set[str]:
    """The project's files, bytecode caches aside."""
    return {
        str(p.relative_to(project))
        for p in project.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def objects_in(build: Path) -> dict[str, int]:
    return {str(o.relative_to(build)): o.stat().st_mtime_ns for o in build.rglob("*.o")}


@pytest.mark.slow
@battery()  # any template's battery: one environment serves all seven
def test_default_projects_build_check_install_and_pass_from_their_wheels(tmp_path, monkeypatch):
    projects = {r.name: scaffold(r, tmp_path / "bake" / r.name, {}) for r in available()}
    compiled = {n for n, p in projects.items() if (p / "CMakeLists.txt").exists()}
    assert compiled == {"ffi"}, compiled
    dist = {name: tmp_path / "dist" / name for name in projects}

    # 1. The sdists, and the pure wheels built from them (as cd.yml builds
    # them), with this environment's build backends.
    # A compiled project's build requirements pin the oldest JAX's FFI headers,
    # which this environment does not hold; its sdist only packs files, so
    # that check is skipped here (its wheel builds in 3., and CI's oldest-JAX
    # job builds it in isolation as a user does).
    for name, project in projects.items():
        only_sdist = ["--sdist", "--skip-dependency-check"] if name in compiled else []
        tool("build", "--no-isolation", *only_sdist, "--outdir", dist[name], project)
    for name, project in projects.items():
        (sdist,) = dist[name].glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            members = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
        # A compiled project's wheel builds from its sdist: that sdist must
        # hold every file but the plumbing. Any sdist must hold what its
        # tests, benchmark and docs need, so they run from it unpacked.
        needed = (
            {f for f in files_in(project) if not f.startswith(PLUMBING)}
            if name in compiled
            else {f for f in files_in(project) if f.startswith(SDIST_CONTENT)}
        )
        assert needed <= members, (name, needed - members)
        assert {m for m in members if m.startswith(PLUMBING)} == set(), name

    # 2. One new environment; nothing of the kit's may leak in.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    run = fresh_venv(tmp_path / "venv", cwd=tmp_path)
    copies = {}
    for name, project in projects.items():
        # A copy of what the tests need, and the benchmark, away from src/.
        copies[name] = tmp_path / "installed" / name
        for source in dict.fromkeys([*wheel_test(project)["test-sources"], "benchmarks"]):
            copy = shutil.copytree if (project / source).is_dir() else shutil.copy2
            copy(project / source, copies[name] / source)
        assert not (copies[name] / "src").exists()

    def wheel(name):
        (found,) = dist[name].glob("*.whl")
        return found

    def install(*names):
        extras = {n: ",".join(wheel_test(projects[n])["test-extras"]) for n in names}
        run("-m", "pip", "install", "--quiet", *(f"{wheel(n)}[{extras[n]}]" for n in names))

    def test_installed(name):
        command = shlex.split(wheel_test(projects[name])["test-command"])
        assert command[0] == "pytest", command
        # Test data that travels with the tests (export's golden artifact)
        # must be found from the installed package too: no skip.
        data = [t for t in DATA_TESTS if (copies[name] / t).is_file()]
        result = run("-m", "pytest", "-q", *INSTALLED_SMOKE, *data, cwd=copies[name])
        assert " passed" in result.stdout, (name, result.stdout[-3000:])
        assert " failed" not in result.stdout, (name, result.stdout[-3000:])
        assert " skipped" not in result.stdout, (name, result.stdout[-3000:])

    install(FIRST)
    test_installed(FIRST)

    # 3. The FFI wheel, built in this environment with the build requirements
    # its README's dev loop installs, so that the dev loop (5.) reuses its
    # build directory instead of compiling everything again.
    ffi = projects["ffi"]
    run("-m", "pip", "install", "--quiet", "scikit-build-core", "nanobind")
    pip_wheel = ["-m", "pip", "wheel", "--quiet", "--no-build-isolation", "--no-deps"]
    run(*pip_wheel, "--wheel-dir", dist["ffi"], ffi)

    # 4. The checks cd.yml runs (check-wheel-contents ignores no code), then
    # every project's tests against its installed wheel.
    wheels = [wheel(name) for name in projects]
    tool("twine", "check", "--strict", *wheels, *(tmp_path / "dist").glob("*/*.tar.gz"))
    tool("check_wheel_contents", *wheels)
    for name in projects:
        assert wheel(name).name.endswith("-py3-none-any.whl") == (name not in compiled)
    # The platform tag auditwheel repair can give the compiled wheel (as
    # cibuildwheel does, in a manylinux container), with nothing to copy in.
    show = json.loads(tool("auditwheel", "show", "--json", wheel("ffi")))
    assert show["overall_tag"].startswith("manylinux_"), show
    assert show["overall_tag"].endswith(platform.machine()), show
    assert show["external_libs"] == {}, show

    install(*(n for n in projects if n != FIRST))
    # Each package is imported from the environment's site-packages (the
    # copies hold no package), and the kit is not importable there.
    origins = run(
        "-c",
        "import importlib.util, json, sys; "
        "print(json.dumps({n: getattr(importlib.util.find_spec(n), 'origin', None) "
        "for n in sys.argv[1:]}))",
        "jax_ladder",
        *(init.parent.name for p in projects.values() for init in p.glob("src/*/__init__.py")),
        cwd=copies[FIRST],
    ).stdout
    origins = json.loads(origins)
    assert origins.pop("jax_ladder") is None
    assert len(origins) == len(projects), origins
    for package, origin in origins.items():
        assert Path(origin).is_relative_to(tmp_path / "venv"), (package, origin)
        assert "site-packages" in Path(origin).parts, (package, origin)
    for name in projects:
        if name != FIRST:
            test_installed(name)
    for name in projects:
        run("benchmarks/bench.py", "--quick", cwd=copies[name])

    # 5. The FFI README's fast dev loop: editable, no build isolation, then a
    # C++ edit recompiles that one file in the fixed build directory.
    run("-m", "pip", "install", "--quiet", "--no-build-isolation", "-e", ".", cwd=ffi)
    build = ffi / "build"
    before = objects_in(build)
    kernels = ffi / "csrc" / "cpu_kernels.cc"
    kernels.write_text(kernels.read_text() + "\n// an edit\n")
    run("-m", "pip", "install", "--quiet", "--no-build-isolation", "-e", ".", cwd=ffi)
    after = objects_in(build)
    assert before.keys() == after.keys()
    rebuilt = {Path(o).name for o in after if after[o] != before[o]}
    assert rebuilt == {"cpu_kernels.cc.o"}, rebuilt
    # The editable install is the one imported now (from anywhere), and its
    # handlers work.
    (init,) = ffi.glob("src/*/__init__.py")
    imported = run("-c", f"import {init.parent.name} as p; print(p.__file__)", cwd=tmp_path)
    assert Path(imported.stdout.strip()) == init, imported.stdout
    result = run(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_handlers.py",
        "-k",
        "values_match_reference or gradients_match_reference",
        cwd=ffi,
    )
    assert " passed" in result.stdout, result.stdout[-3000:]
