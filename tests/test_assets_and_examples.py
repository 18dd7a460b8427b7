"""Assets are runnable and self-checking; examples pass their own tests and
their benchmarks run. Both are run from the source tree, as users run them."""

import subprocess
import sys

import pytest
from conftest import REPO

from jax_ladder.rungs import assets_dir

ASSETS = sorted((REPO / "assets").glob("*.py"))
EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.is_dir())


def run(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900
    )


@pytest.mark.parametrize("asset", ASSETS, ids=lambda p: p.name)
def test_asset_runs_its_self_check(asset):
    result = run(asset)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def test_assets_ship_inside_the_installed_package():
    installed = sorted(p.name for p in assets_dir().glob("*.py"))
    assert installed == [p.name for p in ASSETS]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_its_tests(example):
    result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", example)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_benchmark_runs(example):
    result = run(example / "bench.py", "--quick")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "x" in result.stdout  # a ratio was printed
