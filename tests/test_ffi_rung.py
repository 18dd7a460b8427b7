"""What only the FFI rung needs beyond test_templates.py (which already bakes,
builds and tests every option combination): its tests once more under
AddressSanitizer and UndefinedBehaviorSanitizer. (Its wheel, and the README's
editable dev loop in a brand-new environment: test_wheels.py.)"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jax_ladder.rungs import by_name
from jax_ladder.runner import run_project_tests
from jax_ladder.scaffold import scaffold

FFI = by_name("ffi")


def sanitizer_runtimes() -> list[str]:
    """libasan and libubsan of the C++ compiler CMake will use, or [] if unknown."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        return []
    found = []
    for name in ("libasan.so", "libubsan.so"):
        path = subprocess.run(
            [compiler, f"-print-file-name={name}"], capture_output=True, text=True
        ).stdout.strip()
        if not Path(path).is_absolute():  # the compiler echoes the bare name when it has none
            return []
        found.append(path)
    return found


SANITIZER_RUNTIMES = sanitizer_runtimes()


@pytest.mark.skipif(not SANITIZER_RUNTIMES, reason="needs a C++ compiler with ASan and UBSan")
def test_project_tests_pass_under_asan_and_ubsan(tmp_path):
    """The whole extension, instrumented, inside Python beside an uninstrumented
    jaxlib, as the generated README documents. The sanitizer runtimes must be
    loaded before anything else (LD_PRELOAD); leak checking is off because
    Python and jaxlib keep allocations alive at exit."""
    project = scaffold(FFI, tmp_path, {})
    env = {
        **os.environ,
        "LD_PRELOAD": " ".join(SANITIZER_RUNTIMES),
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }
    run = run_project_tests(
        project,
        extra_args=("tests/test_rms_norm.py",),
        build_config=(
            "cmake.define.RMS_NORM_SANITIZE=ON",
            "cmake.build-type=RelWithDebInfo",
            "build-dir=build/asan",
        ),
        env=env,
    )
    assert run.ok, run.output[-5000:]
    # The module that ran was instrumented (an instrumented module also refuses
    # to load unless the ASan runtime comes first, so the preload took effect).
    (module,) = (project / "build" / "asan").glob("_ffi*.so")
    assert b"__asan_report" in module.read_bytes()
