"""Assets (single-file starters, assets/<rung>/<what>.py) are runnable and
self-checking; examples (examples/<rung>/, and examples/ladder/, one op at
every rung) pass their own tests and their benchmarks run. Both are run from
the source tree, as users run them. The FFI examples' C++ (examples/ffi and
the ladder's FFI rung) is compiled by the kit's test install (scripts/_env.sh
switches CMakeLists.txt's JAX_LADDER_BUILD_FFI_EXAMPLE on; a plain
`pip install .` compiles nothing)."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, oldest_jax_path

from jax_ladder.rungs import LADDER, assets_dir
from jax_ladder.runner import build_project

ASSETS = sorted((REPO / "assets").rglob("*.py"))
# An example is a folder with its own tests and bench.py; examples/shared holds what several
# of them import (examples/conftest.py says how), and is not one.
EXAMPLES = sorted(p.parent for p in (REPO / "examples").glob("*/bench.py"))


def asset_names(root):
    """Each asset as <rung>/<file>.py, relative to an assets/ folder."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))


def run(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900
    )


# examples/ladder climbs one op through every rung, so it belongs to none;
# examples/opcheck runs the conformance matrix on ops from outside the kit;
# examples/shared is what several examples import.
NOT_A_RUNG = {"templates": set(), "assets": set(), "examples": {"ladder", "opcheck", "shared"}}


@pytest.mark.parametrize("kind", ["templates", "assets", "examples"])
def test_each_folder_of_a_rung_is_named_as_the_registry_names_the_rung(kind):
    folders = {p.name for p in (REPO / kind).iterdir() if p.is_dir()} - {"__pycache__"}
    assert folders, kind
    assert folders - NOT_A_RUNG[kind] <= {rung.name for rung in LADDER}, kind


def test_every_asset_sits_in_its_rungs_folder():
    assert [p for p in ASSETS if p.parent.parent != REPO / "assets"] == []


def test_a_templated_rung_keeps_its_registry_name_for_its_template():
    assert all(rung.template in (None, rung.name) for rung in LADDER)


@pytest.mark.parametrize("asset", ASSETS, ids=lambda p: p.relative_to(REPO / "assets").as_posix())
def test_asset_runs_its_self_check(asset):
    result = run(asset)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def test_assets_ship_inside_the_installed_package():
    assert asset_names(assets_dir()) == asset_names(REPO / "assets")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_its_tests(example):
    result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", example)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout


# The FFI handlers of examples/ffi and examples/ladder come from this
# environment's kit build, against the newest JAX's FFI headers, and register
# when the example is imported; the oldest jaxlib refuses them ("the handler's
# API version (0.5) is incompatible with the framework's API version (0.3)"),
# and then no test of the example can run. A user on the oldest JAX builds the
# kit against its headers. So those two examples are left out here.
OLDEST_JAX_LEAVES_OUT = {"ffi", "ladder"}


# The window's oldest end, like the default projects on the oldest Python:
# the full tier's (tests/tiers.py), whose weekly and release runs hold the
# examples to it; the quick tier runs them on the newest JAX.
@pytest.mark.release_path
@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if e.name not in OLDEST_JAX_LEAVES_OUT], ids=lambda p: p.name
)
def test_example_passes_its_tests_on_the_oldest_jax(example):
    """The examples stay inside the JAX window: a user on Python 3.11 gets
    JAX 0.10.x (no newer JAX has wheels for it), so each example's tests also
    run under the window's oldest JAX (jax and jaxlib first on PYTHONPATH)."""
    path = os.pathsep.join([str(oldest_jax_path()), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_benchmark_runs(example):
    result = run(example / "bench.py", "--quick")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "x" in result.stdout  # a ratio was printed


@pytest.mark.parametrize(
    "module",
    ["jax_ladder._ffi_example._tridiagonal_ffi", "jax_ladder._ladder_example._rms_norm_ffi"],
)
def test_kit_install_compiles_the_ffi_examples(module):
    """The kit's test install (scripts/_env.sh, nox's tests session: the define
    JAX_LADDER_BUILD_FFI_EXAMPLE on) builds examples/ffi's and examples/ladder's C++
    into the package, so test_example_passes_its_tests runs compiled FFI code."""
    path = Path(importlib.import_module(module).__file__).resolve()
    # Installed (site-packages, or a --target folder), not a standalone build
    # beside the example's sources (the kit's .venv may sit inside REPO).
    assert not path.is_relative_to(REPO.resolve() / "examples"), path


def test_ffi_example_tests_skip_and_say_why_when_the_kit_is_built_without_it(tmp_path):
    for example in ("ffi", "ladder"):
        if (REPO / "examples" / example / "build").exists():
            pytest.skip(f"examples/{example}/build holds a standalone build, which it would load")
    site = tmp_path / "site"
    off = "cmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=OFF"
    status, output = build_project(REPO, site, (off, f"build-dir={tmp_path / 'build'}"))
    assert status == 0, output[-4000:]
    assert not (site / "jax_ladder" / "_ffi_example").exists()
    assert not (site / "jax_ladder" / "_ladder_example").exists()
    # The ladder's FFI rung only (-k): the other rungs need no build and run elsewhere.
    for args, says in (
        (["examples/ffi"], "FFI tests SKIPPED"),
        (["examples/ladder", "-k", "ffi_handler"], "FFI rung SKIPPED"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(site)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        assert " skipped" in result.stdout
        assert "failed" not in result.stdout
        assert says in result.stdout
        # How to switch them on: the define, not a plain `pip install .`.
        assert "-Ccmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=ON" in result.stdout
