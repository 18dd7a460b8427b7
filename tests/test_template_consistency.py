"""Generated projects stand alone, so a few helpers are copied into every
template on purpose. These tests keep the copies from drifting apart."""

from pathlib import Path

import pytest
from conftest import REPO

from jax_ladder.rungs import available

TEMPLATES = [REPO / "templates" / r.template for r in available()]


def project_dir(template: Path) -> Path:
    return template / "{{cookiecutter.project_name}}"


def function_source(path: Path, name: str) -> str:
    """The text of a top-level function, up to the next top-level statement."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()),
        len(lines),
    )
    return "\n".join(lines[start:end]).strip()


def test_pre_gen_hooks_are_identical():
    hooks = {t.name: (t / "hooks" / "pre_gen_project.py").read_text() for t in TEMPLATES}
    assert len(set(hooks.values())) == 1, sorted(hooks)


@pytest.mark.parametrize(
    ("relative", "function"),
    [("tests/oracle.py", "assert_close"), ("tests/conftest.py", "pytest_terminal_summary")],
)
def test_shared_test_helpers_are_identical(relative, function):
    sources = {t.name: function_source(project_dir(t) / relative, function) for t in TEMPLATES}
    assert len(set(sources.values())) == 1, sorted(sources)
