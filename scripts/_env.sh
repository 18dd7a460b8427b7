# Sourced by scripts/demo and scripts/test: find Python >= 3.11 (3.12 or newer
# preferred) and make sure .venv holds the kit, installed from this checkout
# (with its test extras for scripts/test).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
VERSIONS="$ROOT/src/jax_ladder/versions.py"

# The oldest Python the kit supports (src/jax_ladder/versions.py, PYTHON_OLDEST,
# the oldest the window's oldest JAX has wheels for) and the one preferred: the
# kit's tests run on the window's newest JAX, and JAX 0.11 and newer publish
# wheels for Python 3.12 and newer only (on 3.11, pip installs JAX 0.10.x).
OLDEST_MINOR="$(sed -n 's/^PYTHON_OLDEST = "3\.\([0-9]*\)"$/\1/p' "$VERSIONS")"
PREFERRED_MINOR=12

at_least() { "$1" -c "import sys; sys.exit(sys.version_info < (3, $2))" >/dev/null 2>&1; }
ok_python() { at_least "$1" "$OLDEST_MINOR"; }

find_python() {
    local minor candidate
    # An explicit choice wins.
    if [ -n "${PYTHON:-}" ] && command -v "$PYTHON" >/dev/null 2>&1 && ok_python "$PYTHON"; then
        command -v "$PYTHON"
        return
    fi
    # Then, for a preferred Python first and the oldest supported second: what
    # is on PATH (pyenv shims for versions that are not selected fail the check
    # and are skipped), then pyenv's own.
    for minor in "$PREFERRED_MINOR" "$OLDEST_MINOR"; do
        for candidate in python3.12 python3.13 python3.14 "python3.$OLDEST_MINOR" python3; do
            if command -v "$candidate" >/dev/null 2>&1 && at_least "$candidate" "$minor"; then
                command -v "$candidate"
                return
            fi
        done
        if command -v pyenv >/dev/null 2>&1; then
            for candidate in "$(pyenv root)"/versions/3.*/bin/python3; do
                if [ -x "$candidate" ] && at_least "$candidate" "$minor"; then
                    echo "$candidate"
                    return
                fi
            done
        fi
    done
    echo "error: jax-ladder needs Python >= 3.$OLDEST_MINOR, and none was found." >&2
    echo "Install Python 3.$PREFERRED_MINOR or newer (JAX 0.11 and newer need it; on 3.$OLDEST_MINOR," >&2
    echo "pip installs JAX 0.10.x), or set PYTHON=/path/to/python3.$PREFERRED_MINOR." >&2
    exit 1
}

if [ ! -x "$VENV/bin/python" ] || ! ok_python "$VENV/bin/python"; then
    PY="$(find_python)"
    echo "==> creating $VENV with $PY ($("$PY" --version))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip 2>/dev/null
fi
if ! at_least "$VENV/bin/python" "$PREFERRED_MINOR"; then
    echo "note: $VENV has Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())'):" \
        "JAX 0.11 and newer publish no wheels for it, so it gets JAX 0.10.x, not the JAX the" \
        "kit's tests and measurements ran on (Python 3.$PREFERRED_MINOR or newer has it)." >&2
fi

# The kit's tests run on the JAX they were last measured on, the window's
# newest entry (src/jax_ladder/versions.py, JAX_TESTED), in .venv and in every
# environment the tests make: a newer JAX of the window (0.12.1 on 2026-12-06)
# is tried by the jax-next workflow first, then the window moves. A ceiling,
# not a pin, so the window's older JAX still installs where a test asks for it.
JAX_TESTED="$(sed -n 's/^JAX_WINDOW = (.*"\([0-9.]*\)")$/\1/p' "$VERSIONS")"
mkdir -p "$ROOT/.cache"
printf 'jax<=%s\njaxlib<=%s\n' "$JAX_TESTED" "$JAX_TESTED" >"$ROOT/.cache/jax-tested.txt"
export PIP_CONSTRAINT="$ROOT/.cache/jax-tested.txt"

# Reinstall the kit on every run (a few seconds) so tests always see this
# checkout, installed the way users get it: templates inside the package.
echo "==> installing jax-ladder from $ROOT into $VENV"
pip_install() {
    # Drop pip's warnings about index locations configured on some machines.
    "$VENV/bin/python" -m pip install --quiet "$@" 2> >(grep -v "is neither a file nor a directory" >&2)
}
# The kit's own tests exercise compiled FFI code: examples/ffi's and
# examples/ladder's C++, which a plain `pip install .` leaves out (it compiles
# nothing; CMakeLists.txt says why). Here they are switched on, built without
# build isolation against this environment's jax and nanobind, so those must be
# present first; wheel.platlib=true tags that wheel for its platform. The two
# build tools are the kit's `ffi` extra, not its dependencies: scripts/demo
# needs them too, as `jax-ladder demo` builds the ffi project in place
# (tests/test_packaging.py holds these pins to the extra's).
pip_install "scikit-build-core>=0.11" "nanobind>=2.4" "jax>=0.10,<0.13"
FFI_EXAMPLES="${KIT_BUILD_FFI_EXAMPLES:-ON}"
BUILD_SETTINGS=("-Ccmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=$FFI_EXAMPLES")
if [ "$FFI_EXAMPLES" = ON ]; then
    BUILD_SETTINGS+=("-Cwheel.platlib=true")
fi
# The test tools (sphinx, mypy, playwright, ...) only where the caller runs
# the kit's tests: scripts/demo sets KIT_EXTRAS="" and KIT_BUILD_FFI_EXAMPLES=OFF
# (a first look needs neither the tools nor the kit's compiled examples).
pip_install --no-build-isolation "$ROOT${KIT_EXTRAS-[test]}" "${BUILD_SETTINGS[@]}"
