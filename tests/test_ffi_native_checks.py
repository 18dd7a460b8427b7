"""The FFI template's native checks, run here the way its CI runs them: the
workflows `cuda.yml` and `sanitizers.yml` each call `tools/native-checks.sh`, and
so do these tests, so a step that breaks fails here first.

- `cuda`: nvcc, the CUDA headers and runtime from PyPI compile the CUDA handler
  on a machine with no GPU; any CUDA toolkit installed here is kept out of the
  script's reach, so the PyPI route alone has to work.
- `sanitizers`: the project's tests with the extension built under ASan and
  UBSan.

The script installs the project, editable, into the Python it finds on PATH.
Here that is a throwaway virtual environment that sees the kit's own packages
(jax, nanobind, scikit-build-core, pytest) through a `.pth` file: the kit's
environment is left untouched, and nothing is downloaded but the CUDA wheels."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from conftest import battery

from jax_ladder.rungs import by_name
from jax_ladder.scaffold import scaffold

FFI = by_name("ffi")
# What CMake or tests/test_cuda.py would otherwise take a CUDA compiler from.
CUDA_VARIABLES = ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT", "CUDAARCHS")
PYTEST = ("-q", "-rA", "-p", "no:cacheprovider")  # passed on by the script


def overlay_venv(path: Path) -> Path:
    """A virtual environment whose own installs go to path, and which imports
    everything else from this one. Returns its bin folder."""
    venv.create(path, with_pip=False)
    (site,) = path.glob("lib/python*/site-packages")
    paths = dict.fromkeys(sysconfig.get_path(key) for key in ("purelib", "platlib"))
    (site / "kit-packages.pth").write_text("".join(f"{p}\n" for p in paths))
    return path / "bin"


def run_native_checks(project: Path, bin_dir: Path, *args: str, **extra_env: str):
    """`bash tools/native-checks.sh ARGS` in project, with bin_dir's python first
    on PATH, no CUDA variables and no folder on PATH that holds an nvcc."""
    env = {k: v for k, v in os.environ.items() if k not in CUDA_VARIABLES}
    path = [d for d in env.get("PATH", "").split(os.pathsep) if d and not Path(d, "nvcc").exists()]
    env["PATH"] = os.pathsep.join([str(bin_dir), *path])
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env.update(extra_env)
    return subprocess.run(
        ["bash", "tools/native-checks.sh", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def cmake_cuda_settings(build: Path) -> str:
    """The CUDA compiler and toolkit CMake recorded for the build in build."""
    cache = (build / "CMakeCache.txt").read_text()
    (compiler_file,) = build.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")
    return cache + compiler_file.read_text()


def cuda_compile_flags(build: Path) -> str:
    """The build rules that hold nvcc's flags (Ninja's or Make's)."""
    ninja = build / "build.ninja"
    if ninja.exists():
        return ninja.read_text()
    return (build / "CMakeFiles" / "rowwise_cuda.dir" / "flags.make").read_text()


@pytest.mark.slow
@battery(FFI)
def test_cuda_handler_compiles_with_nvcc_from_pypi(tmp_path):
    project = scaffold(FFI, tmp_path / "out", {"cuda": "yes"})
    bin_dir = overlay_venv(tmp_path / "venv")
    # One architecture: the route is the same for all, and each costs an nvcc
    # pass (CI compiles the default, every major architecture).
    run = run_native_checks(project, bin_dir, "cuda", *PYTEST, "tests/test_cuda.py", CUDAARCHS="75")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # tests/test_cuda.py found the compiler and the handler in the module.
    assert "PASSED tests/test_cuda.py::test_build_contains_the_cuda_handler" in run.stdout

    toolkit = project / "build" / "cuda-toolkit" / "nvidia" / "cu13"
    settings = cmake_cuda_settings(project / "build" / "cuda")
    assert f"CMAKE_CUDA_COMPILER:STRING={toolkit}/bin/nvcc\n" in settings
    assert f'set(CMAKE_CUDA_COMPILER_TOOLKIT_ROOT "{toolkit}")' in settings
    assert f'set(CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES "{toolkit}/include")' in settings
    # CUDAARCHS reached nvcc (CMakeLists.txt defaults to all-major only without it).
    assert "arch=compute_75" in cuda_compile_flags(project / "build" / "cuda")


def test_cuda_check_has_nothing_to_do_without_a_cuda_handler(tmp_path):
    project = scaffold(FFI, tmp_path, {"cuda": "no"})
    run = run_native_checks(project, Path(sys.executable).parent, "cuda")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "nothing for nvcc to compile" in run.stdout
    assert not (project / "build").exists()


@pytest.mark.slow
@battery(FFI)
def test_project_tests_pass_under_the_sanitizer_script(tmp_path):
    project = scaffold(FFI, tmp_path / "out", {})
    bin_dir = overlay_venv(tmp_path / "venv")
    run = run_native_checks(project, bin_dir, "sanitizers", *PYTEST, "tests/test_handlers.py")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert " passed" in run.stdout
    # The module that ran was instrumented (an instrumented module also refuses
    # to load unless the ASan runtime comes first, so the preload took effect).
    (module,) = (project / "build" / "asan-module").glob("_ffi*.so")
    assert b"__asan_report" in module.read_bytes()


def test_script_refuses_an_unknown_check(tmp_path):
    project = scaffold(FFI, tmp_path, {})
    run = run_native_checks(project, Path(sys.executable).parent, "cdua")
    assert run.returncode == 2
    assert "usage: bash tools/native-checks.sh cuda|sanitizers" in run.stderr
