"""Build csrc/kernel_check.cc and run it: the CPU kernels, the handlers' own
path (run_forward, run_backward: the row-parallel loop and the huge-page
advice), the loop with a pool that refuses tasks, and the handlers' exception
guard, each against the op's rows run by a direct loop. Where the project has
the CUDA handler, it also checks the CUDA kernels' rows, compiled for the CPU.

Twice: a plain build, quick to compile (the first to fail when csrc/ breaks
something), and one with AddressSanitizer and UndefinedBehaviorSanitizer
watching (they do not run inside this Python process beside jaxlib; see
README.md). Each build stays in build/ between runs: CMake recompiles only
what changed, so a run with csrc/ untouched compiles nothing."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devices import MISSING_FACILITY

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None, reason="needs cmake and a C++ compiler"
)


def run(command, cwd=ROOT):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def build_kernel_check(sanitize: bool = True) -> Path:
    """Builds kernel_check, under the sanitizers or plain; returns the binary.
    Both at -O1 without debug information, which compiles in a fraction of
    the time of an optimised build with it (the sanitizers' reports still
    name the functions). Each configuration (this Python, whose jax knows
    where the XLA FFI headers are; the compiler) has its own build folder,
    configured once: CMake then recompiles what changed in csrc/, and
    configures again by itself when CMakeLists.txt changes."""
    configure = ["-DFFI_MODULE=OFF", f"-DFFI_SANITIZE={'ON' if sanitize else 'OFF'}"]
    configure += ["-DCMAKE_BUILD_TYPE=None", "-DCMAKE_CXX_FLAGS=-O1"]
    configure += [f"-DPython_EXECUTABLE={sys.executable}"]
    key = "\n".join([*configure, os.environ.get("CXX", "")])
    build = ROOT / "build" / ("kernel-check-" + hashlib.sha256(key.encode()).hexdigest()[:12])
    if not (build / "CMakeCache.txt").exists():
        run(["cmake", "-S", str(ROOT), "-B", str(build), *configure])
    run(["cmake", "--build", str(build), "--target", "kernel_check"])
    return build / "kernel_check"


def check(output):
    assert "all checks passed" in output
    if (ROOT / "csrc" / "cuda_block.h").exists():
        assert "checked the CUDA kernels' rows on the CPU" in output
    if (ROOT / "csrc" / "huge_pages.h").exists() and sys.platform == "linux":
        assert "checked the huge-page advice" in output


def test_kernels_pass():
    check(run([str(build_kernel_check(sanitize=False))]))


# A program with nothing to find, and a thread, as kernel_check's pool starts them.
SANITIZER_PROBE = "#include <thread>\nint main() { std::thread([] {}).join(); }\n"


def run_probe(binary: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)


def sanitizers_problem(build: Path) -> str | None:
    """What a trivial program built under the sanitizers, by the compiler of the build
    folder `build`, printed when it failed here; None if it ran. Where it fails, the
    sanitizers cannot run on this machine: LeakSanitizer, for one, stops the threads with
    ptrace at exit, which a sandbox (gVisor) refuses."""
    cache = (build / "CMakeCache.txt").read_text()
    compiler = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", cache, re.MULTILINE).group(1)
    source, binary = build / "sanitizer_probe.cc", build / "sanitizer_probe"
    source.write_text(SANITIZER_PROBE)
    run([compiler, "-fsanitize=address,undefined", "-pthread", str(source), "-o", str(binary)])
    result = run_probe(binary)
    if result.returncode == 0:
        return None
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines()]
    return " ".join(filter(None, lines))[-500:] or f"exit status {result.returncode}"


def test_kernels_pass_under_asan_and_ubsan():
    binary = build_kernel_check()
    problem = sanitizers_problem(binary.parent)
    if problem:
        pytest.skip(f"{MISSING_FACILITY}AddressSanitizer cannot run here: {problem}")
    check(run([str(binary)]))


def test_where_the_sanitizers_cannot_run_the_probe_says_what_they_printed(monkeypatch):
    """The probe's answer on a machine without ptrace (gVisor, 2026-12-06)."""
    printed = (
        "==18566==LeakSanitizer has encountered a fatal error.\n"
        "==18566==HINT: LeakSanitizer does not work under ptrace (strace, gdb, etc)\n"
    )
    build = build_kernel_check().parent
    failed = subprocess.CompletedProcess([], 1, "", printed)
    monkeypatch.setattr(sys.modules[__name__], "run_probe", lambda binary: failed)
    problem = sanitizers_problem(build)
    assert problem.startswith("==18566==LeakSanitizer has encountered a fatal error.")
    assert problem.endswith("does not work under ptrace (strace, gdb, etc)")


def test_second_build_reuses_the_first():
    binary = build_kernel_check(sanitize=False)
    built = binary.stat().st_mtime_ns
    assert build_kernel_check(sanitize=False).stat().st_mtime_ns == built
