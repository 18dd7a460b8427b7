"""Build csrc/kernel_check.cc with AddressSanitizer and UndefinedBehaviorSanitizer
and run it: the kernels, the row-parallel loop (also with a pool that refuses
tasks) and the handlers' exception guard, checked with the sanitizers watching
(they do not run inside this Python process beside jaxlib; see README.md).
Where the project has the CUDA handler, it also checks the CUDA kernels' row
arithmetic, compiled for the CPU."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(command, cwd):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake and a C++ compiler")
def test_kernels_pass_under_asan_and_ubsan(tmp_path):
    build = tmp_path / "asan"
    # This Python has jax, which knows where the XLA FFI headers are.
    configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DRMS_NORM_MODULE=OFF"]
    configure.append(f"-DPython_EXECUTABLE={sys.executable}")
    run([*configure, "-DRMS_NORM_SANITIZE=ON", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], ROOT)
    run(["cmake", "--build", str(build), "--target", "kernel_check"], ROOT)
    output = run([str(build / "kernel_check")], ROOT)
    assert "all checks passed" in output
    if (ROOT / "csrc" / "rms_norm_block.h").exists():
        assert "checked the CUDA kernels' row arithmetic" in output
