"""Build csrc/kernel_check.cc with AddressSanitizer and UndefinedBehaviorSanitizer
and run it: the kernels, the handlers' own path (run_forward, run_backward:
the row-parallel loop and the huge-page advice), the loop with a pool that
refuses tasks, and the handlers' exception guard, checked with the sanitizers
watching (they do not run inside this Python process beside jaxlib; see
README.md). Where the project has the CUDA handler, it also checks the CUDA
kernels' row arithmetic, compiled for the CPU.

The build stays in build/ between runs: CMake recompiles only what changed,
so a run with csrc/ untouched compiles nothing."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None, reason="needs cmake and a C++ compiler"
)


def run(command, cwd=ROOT):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def build_kernel_check() -> Path:
    """Builds kernel_check under the sanitizers; returns the binary. Each
    configuration (this Python, whose jax knows where the XLA FFI headers
    are; the compiler) has its own build folder, configured once: CMake then
    recompiles what changed in csrc/, and configures again by itself when
    CMakeLists.txt changes."""
    configure = ["-DRMS_NORM_MODULE=OFF", "-DRMS_NORM_SANITIZE=ON"]
    configure += ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DPython_EXECUTABLE={sys.executable}"]
    key = "\n".join([*configure, os.environ.get("CXX", "")])
    build = ROOT / "build" / ("kernel-check-" + hashlib.sha256(key.encode()).hexdigest()[:12])
    if not (build / "CMakeCache.txt").exists():
        run(["cmake", "-S", str(ROOT), "-B", str(build), *configure])
    run(["cmake", "--build", str(build), "--target", "kernel_check"])
    return build / "kernel_check"


def test_kernels_pass_under_asan_and_ubsan():
    output = run([str(build_kernel_check())])
    assert "all checks passed" in output
    if (ROOT / "csrc" / "rms_norm_block.h").exists():
        assert "checked the CUDA kernels' row arithmetic" in output


def test_second_build_reuses_the_first():
    binary = build_kernel_check()
    built = binary.stat().st_mtime_ns
    assert build_kernel_check().stat().st_mtime_ns == built
