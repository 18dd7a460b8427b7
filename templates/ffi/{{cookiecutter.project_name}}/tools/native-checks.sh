#!/usr/bin/env bash
# The native checks that .github/workflows/cuda.yml and sanitizers.yml run, to
# run locally too (Linux, from any directory, in the virtual environment you
# develop in: the project is installed into it in editable mode):
#
#   bash tools/native-checks.sh cuda [PYTEST ARGS]        compile the CUDA handler with
#       nvcc from PyPI (no GPU, no CUDA toolkit needed), then run the tests
#   bash tools/native-checks.sh sanitizers [PYTEST ARGS]  run the tests with the
#       extension built under AddressSanitizer and UndefinedBehaviorSanitizer
#
# Each leaves its build installed; `python -m pip install --no-build-isolation -e .`
# returns to the normal one (README.md, "Build and run").
set -euo pipefail
cd "$(dirname "$0")/.."

# nvcc, the CUDA runtime and headers, and CCCL (cuda_fp16.h includes its
# <nv/target>), at the versions of one CUDA release: the meta-package pins them.
CUDA_TOOLKIT="cuda-toolkit[nvcc,cccl]==13.5.0"
TOOLKIT_DIR=build/cuda-toolkit

# Builds without isolation reuse this environment, so its build requirements
# must be here first: pyproject.toml's [build-system] requires, as declared,
# but for the exact jax and jaxlib (the oldest supported, which a shipped
# wheel builds against) where this environment has a JAX already: these
# builds are checked here, with it, and never shipped (CMake says so).
install_build_requirements() {
    python - <<'PY'
import importlib.util
import re
import subprocess
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
have_jax = importlib.util.find_spec("jaxlib") is not None
requires = [
    r for r in requires
    if not (have_jax and re.match(r"jax(lib)?\b(?![-_.])", r))
]
subprocess.run([sys.executable, "-m", "pip", "install", *requires], check=True)
PY
}

cuda() {
    if ! compgen -G "csrc/*.cu" >/dev/null; then
        echo "No CUDA source (csrc/*.cu) in this project: nothing for nvcc to compile."
        return
    fi
    # Into a folder of its own, not the environment: nvcc is a build tool, and
    # the wheels are plain files (bin/, include/, lib/ under nvidia/cu13/).
    local nvcc="$PWD/$TOOLKIT_DIR/nvidia/cu13/bin/nvcc"
    if [ ! -x "$nvcc" ]; then
        python -m pip install --target "$TOOLKIT_DIR" "$CUDA_TOOLKIT"
    fi
    # CMake's check_language(CUDA) takes the compiler from CUDACXX, and nvcc
    # finds its headers and libraries beside itself; tests/test_cuda.py reads
    # CUDACXX too, so its build check runs instead of skipping.
    export CUDACXX="$nvcc"
    install_build_requirements
    # FFI_CUDA=ON: a .cu that does not compile fails the build, rather
    # than leaving a CPU-only module behind.
    python -m pip install --no-build-isolation -e ".[test]" -Cbuild-dir=build/cuda \
        -Ccmake.define.FFI_CUDA=ON
    local package
    package="$(basename "$(dirname src/*/__init__.py)")"
    python -c "import sys, $package as p; sys.exit(not p.cuda_available())" \
        || { echo "the module was built without the CUDA handler" >&2; exit 1; }
    python -m pytest "$@"
}

sanitizers() {
    # The runtimes of the compiler CMake uses: they must be loaded before
    # anything else in the process, since python and jaxlib are not instrumented.
    local cxx="${CXX:-c++}" runtimes=() name path
    for name in libasan.so libubsan.so; do
        path="$("$cxx" -print-file-name="$name")"
        if [[ "$path" != /* ]]; then  # it echoes the bare name when it has none
            echo "$cxx has no $name: install its sanitizer runtimes" >&2
            exit 1
        fi
        runtimes+=("$path")
    done
    install_build_requirements
    python -m pip install --no-build-isolation -e ".[test]" -Cbuild-dir=build/asan-module \
        -Ccmake.define.FFI_SANITIZE=ON -Ccmake.build-type=RelWithDebInfo
    # Leak checking off: Python and jaxlib keep allocations alive at exit.
    # UBSan stops at the first error, with a stack trace. A sanitizer ends the
    # process at once, so pytest must not hold the report (--capture=sys leaves
    # the C-level stderr alone) nor its own progress (unbuffered output).
    LD_PRELOAD="${runtimes[*]}" ASAN_OPTIONS=detect_leaks=0 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONUNBUFFERED=1 \
        python -m pytest --capture=sys "$@"
}

case "${1:-}" in
    cuda | sanitizers) "$@" ;;
    *)
        echo "usage: bash tools/native-checks.sh cuda|sanitizers [PYTEST ARGS]" >&2
        exit 2
        ;;
esac
