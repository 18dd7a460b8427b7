import subprocess
import sys

from conftest import REPO


def test_kit_sources_are_ruff_clean():
    paths = ["src", "tests", "assets", "examples"]
    for args in (["check", *paths], ["format", "--check", *paths]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr
