# Sourced by scripts/demo and scripts/test: find Python >= 3.12 and make sure
# .venv holds the kit, installed from this checkout (with its test extras for
# scripts/test).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

ok_python() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }

find_python() {
    local candidate
    # An explicit choice wins; then what is on PATH (pyenv shims for versions
    # that are not selected fail the check and are skipped); then pyenv's own.
    for candidate in "${PYTHON:-}" python3.12 python3.13 python3.14 python3; do
        if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 && ok_python "$candidate"; then
            command -v "$candidate"
            return
        fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        for candidate in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
            if [ -x "$candidate" ] && ok_python "$candidate"; then
                echo "$candidate"
                return
            fi
        done
    fi
    echo "error: jax-ladder needs Python >= 3.12 (JAX >= 0.11 requires it), and none was found." >&2
    echo "Install Python 3.12 or newer, or set PYTHON=/path/to/python3.12." >&2
    exit 1
}

if [ ! -x "$VENV/bin/python" ] || ! ok_python "$VENV/bin/python"; then
    PY="$(find_python)"
    echo "==> creating $VENV with $PY ($("$PY" --version))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip 2>/dev/null
fi

# The kit's tests run on the JAX they were last measured on, the window's
# newest entry (src/jax_ladder/versions.py, JAX_TESTED), in .venv and in every
# environment the tests make: a newer JAX of the window (0.12.1 on 2026-12-06)
# is tried by the jax-next workflow first, then the window moves. A ceiling,
# not a pin, so the window's older JAX still installs where a test asks for it.
JAX_TESTED="$(sed -n 's/^JAX_WINDOW = (.*"\([0-9.]*\)")$/\1/p' "$ROOT/src/jax_ladder/versions.py")"
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
# Without build isolation the build requirements must be present first: the
# kit compiles its FFI example against this environment's jax and nanobind.
pip_install "scikit-build-core>=0.11" "nanobind>=2.4" "jax>=0.10,<0.13"
# The test tools (sphinx, mypy, playwright, ...) only where the caller runs
# the kit's tests: scripts/demo sets KIT_EXTRAS="" and KIT_BUILD_FFI_EXAMPLES=OFF
# (a first look needs neither the tools nor the kit's compiled examples).
pip_install --no-build-isolation "$ROOT${KIT_EXTRAS-[test]}" \
    "-Ccmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=${KIT_BUILD_FFI_EXAMPLES:-ON}"
