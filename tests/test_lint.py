import subprocess
import sys

from conftest import REPO, assert_lint_clean

KIT_SOURCES = (
    "src",
    "tests",
    "assets",
    "examples",
    "scripts/hardware-check",
    "scripts/readme-samples",
    "scripts/bench-plots",
    "scripts/site-samples",
    "noxfile.py",
)


def test_kit_sources_are_ruff_clean():
    assert_lint_clean(REPO, *KIT_SOURCES)


def test_kit_package_passes_mypy_strict():
    # Configured in pyproject.toml ([tool.mypy]: strict, src/jax_ladder).
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
