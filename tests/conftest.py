import itertools
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from jax_ladder.options import load_options
from jax_ladder.rungs import available, template_dir

REPO = Path(__file__).resolve().parents[1]


def option_combinations(rung):
    """Every combination of a template's choice options (names left at defaults)."""
    options = load_options(template_dir(rung))
    choices = {key: o.choices for key, o in options.items() if o.choices}
    for values in itertools.product(*choices.values()):
        yield dict(zip(choices, values, strict=True))


def combination_id(rung, combo):
    return "-".join([rung.name, *(f"{k}={v}" for k, v in combo.items())])


ALL_COMBINATIONS = [
    pytest.param((rung, combo), id=combination_id(rung, combo))
    for rung in available()
    for combo in option_combinations(rung)
]


def run_cli(*args, cwd, stdin=subprocess.DEVNULL):
    """Run the installed `jax-ladder` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "jax_ladder", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_lint_clean(directory: Path, *paths: str):
    """`ruff check` and `ruff format --check` pass on paths (default: all) in directory."""
    paths = paths or (".",)
    for args in (["check", *paths], ["format", "--check", *paths]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=directory, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def fresh_venv(env_dir: Path, cwd: Path):
    """A brand-new virtual environment at env_dir; returns run(*args), which runs
    its python with args in cwd, asserts success and returns the result."""
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    assert python != sys.executable

    def run(*args):
        result = subprocess.run(
            [python, *args], cwd=cwd, capture_output=True, text=True, timeout=1200
        )
        assert result.returncode == 0, f"{args}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        return result

    return run


def files_under(path: Path):
    return sorted(p.relative_to(path) for p in path.rglob("*"))
