"""Every rung's default project can ship, and its packages are complete.

Its sdist and wheel build here, the wheel from the unpacked sdist, and pass
the checks its release workflow (.github/workflows/cd.yml) runs. Then ONE new
virtual environment (installing JAX is most of the cost) installs the wheels
with their declared dependencies, and each project's tests run there from a
copy of tests/ with no source tree beside it, so they test the installed
wheel. The same environment runs each benchmark, then the FFI project's
documented dev loop (editable install, incremental C++ rebuild).
"""

import json
import platform
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import fresh_venv

from jax_ladder.rungs import available
from jax_ladder.scaffold import scaffold

# cibuildwheel's test step (what it copies next to the installed wheel, the
# extras it installs, the command) comes from a compiled project's
# [tool.cibuildwheel], so this test runs what the release workflow runs. The
# pure-Python projects' release builds no wheel per platform and runs no
# tests; here they get the same steps with these values.
PURE_WHEEL_TEST = {
    "test-sources": ["tests", "pyproject.toml"],
    "test-extras": ["test"],
    "test-command": "pytest",
}
# Installed and tested alone first: jax does not bring flatbuffers, so its
# tests then prove that its own dependencies declare it (the FFI project's
# test extra also brings it).
FIRST = "export"


import resource, time
_T=[time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)]
def lap(label):
    now=time.perf_counter(); ru=resource.getrusage(resource.RUSAGE_CHILDREN); me=resource.getrusage(resource.RUSAGE_SELF)
    cpu=(ru.ru_utime+ru.ru_stime)-(_T[1].ru_utime+_T[1].ru_stime)
    print(f"LAP {label:<30} wall {now-_T[0]:6.1f} s  child cpu {cpu:6.1f} s  self cpu {me.ru_utime+me.ru_stime:6.1f}", flush=True)
    _T[0]=now; _T[1]=ru


def tool(module, *args):
    """`python -m module args` in this (the kit's) environment; its stdout."""
    command = [sys.executable, "-m", module, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def wheel_test(project: Path) -> dict:
    config = tomllib.loads((project / "pyproject.toml").read_text())
    return config.get("tool", {}).get("cibuildwheel") or PURE_WHEEL_TEST


def package_name(project: Path) -> str:
    (init,) = project.glob("src/*/__init__.py")
    return init.parent.name


@pytest.mark.slow
def test_default_projects_build_check_install_and_pass_from_their_wheels(tmp_path, monkeypatch):
    lap("start")
    projects = {r.name: scaffold(r, tmp_path / "bake" / r.name, {}) for r in available()}
    lap("bake")

    # 1. What cd.yml builds, with this environment's build backends.
    wheels = {}
    for name, project in projects.items():
        out = tmp_path / "dist" / name
        tool("build", "--no-isolation", "--outdir", out, project)
        lap(f"build {name}")
        (sdist,) = out.glob("*.tar.gz")
        (wheels[name],) = out.glob("*.whl")
        assert sdist.name.startswith(wheels[name].name.split("-")[0] + "-"), sdist

    # 2. The checks cd.yml runs. check-wheel-contents ignores no code.
    tool("twine", "check", "--strict", *(tmp_path / "dist").glob("*/*"))
    tool("check_wheel_contents", *wheels.values())
    for name, wheel in wheels.items():
        compiled = (projects[name] / "CMakeLists.txt").exists()
        assert wheel.name.endswith("-py3-none-any.whl") != compiled, wheel.name
        if compiled:
            # The platform tag auditwheel repair can give it (cibuildwheel
            # does, in a manylinux container), with nothing to copy in.
            show = json.loads(tool("auditwheel", "show", "--json", wheel))
            assert show["overall_tag"].startswith("manylinux_"), show
            assert show["overall_tag"].endswith(platform.machine()), show
            assert show["external_libs"] == {}, show

    lap("checks")
    # 3. One new environment; nothing of the kit's may leak in.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    run = fresh_venv(tmp_path / "venv", cwd=tmp_path)
    copies = {}
    for name, project in projects.items():
        # A copy of what the tests need, and the benchmark, away from src/.
        copies[name] = tmp_path / "installed" / name
        for source in [*wheel_test(project)["test-sources"], "benchmarks"]:
            copy = shutil.copytree if (project / source).is_dir() else shutil.copy2
            copy(project / source, copies[name] / source)
        assert not (copies[name] / "src").exists()

    def install(*names):
        specs = [f"{wheels[n]}[{','.join(wheel_test(projects[n])['test-extras'])}]" for n in names]
        run("-m", "pip", "install", "--quiet", *specs)

    def test_installed(name):
        command = shlex.split(wheel_test(projects[name])["test-command"])
        assert command[0] == "pytest", command
        result = run("-m", *command, cwd=copies[name])
        assert " passed" in result.stdout, (name, result.stdout[-3000:])

    lap("venv+copies")
    install(FIRST)
    lap("install first")
    test_installed(FIRST)
    lap("test first")
    install(*(n for n in projects if n != FIRST))
    lap("install rest")
    # Every package is imported from the environment's site-packages (the
    # copies hold no package), and the kit is not importable there.
    names = {n: package_name(p) for n, p in projects.items()}
    origins = run(
        "-c",
        "import importlib.util, json, sys; "
        "print(json.dumps({n: importlib.util.find_spec(n) and importlib.util.find_spec(n).origin "
        "for n in sys.argv[1:]}))",
        "jax_ladder",
        *names.values(),
        cwd=copies[FIRST],
    ).stdout
    origins = json.loads(origins)
    assert origins.pop("jax_ladder") is None
    site = tmp_path / "venv" / "lib"
    for name, origin in origins.items():
        assert Path(origin).is_relative_to(site) and "site-packages" in origin, (name, origin)
    lap("probe")
    for name in projects:
        if name != FIRST:
            test_installed(name)
            lap(f"test {name}")
    for name in projects:
        run("benchmarks/bench.py", "--quick", cwd=copies[name])
        lap(f"bench {name}")

    # 4. The FFI README's fast dev loop, in the same environment: editable,
    # no build isolation (the build requirements installed by hand), then a
    # C++ edit rebuilds incrementally in the fixed build directory.
    ffi = projects["ffi"]
    run("-m", "pip", "install", "--quiet", "scikit-build-core", "nanobind")
    lap("install skb")
    run("-m", "pip", "install", "--quiet", "--no-build-isolation", "-e", ".", cwd=ffi)
    lap("editable 1")
    kernels = ffi / "csrc" / "rms_norm_kernels.cc"
    kernels.write_text(kernels.read_text() + "\n// an edit\n")
    run("-m", "pip", "install", "--quiet", "--no-build-isolation", "-e", ".", cwd=ffi)
    lap("editable 2")
    result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_rms_norm.py", cwd=ffi)
    lap("test rms_norm")
    assert " passed" in result.stdout, result.stdout[-3000:]
