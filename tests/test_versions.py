"""jax_ladder.versions is the one definition of the supported JAX range; every
other place that states it (packaging, scripts, templates, CI, prose) must agree."""

import json
import re
import tomllib
from pathlib import Path

import pytest
from conftest import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jax_ladder.rungs import available
from jax_ladder.versions import JAX_SPEC, JAX_TESTED

TEMPLATES = [REPO / "templates" / r.template for r in available()]
PROJECT = "{{cookiecutter.project_name}}"
# A stated range: a requirement on jax ("jax[tpu]>=A,<B"; exact pins aside),
# or any two-sided range (JAX's is the only one the kit writes), as in prose.
STATED_RANGE = re.compile(
    r"\bjax(?:\[[\w,]+\])?((?:[<>!~]=?\s*\d[\w.*]*\s*,?\s*)+)"
    r"|(>=\s*\d[\w.]*\s*,\s*<\s*\d[\w.]*)"
)
STATED_TESTED = re.compile(r"tested on (?:jax/jaxlib |jax |jaxlib )?(\d+(?:\.\d+)+)")
SKIPPED_DIRS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".json", ".cfg", ".txt"}


def text_files():
    """The kit's own text files (scripts/ also without a suffix), but not versions.py."""
    for path in sorted(REPO.rglob("*")):
        parts = set(path.relative_to(REPO).parts)
        if parts & SKIPPED_DIRS or any(p.endswith(".egg-info") for p in parts):
            continue
        text = path.suffix in TEXT_SUFFIXES or path.parent.name == "scripts"
        if path.is_file() and text and path != REPO / "src" / "jax_ladder" / "versions.py":
            yield path


def lower_bound(spec: str) -> Version:
    return next(Version(s.version) for s in SpecifierSet(spec) if s.operator == ">=")


def test_the_definition_is_a_valid_range_holding_the_tested_version():
    assert Version(JAX_TESTED) in SpecifierSet(JAX_SPEC)


def test_the_kits_dependency_and_build_requirement_use_the_range():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    requirements = pyproject["build-system"]["requires"] + pyproject["project"]["dependencies"]
    jax = [Requirement(r) for r in requirements if Requirement(r).name == "jax"]
    assert len(jax) == 2, requirements
    assert all(r.specifier == SpecifierSet(JAX_SPEC) for r in jax), jax


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_template_receives_the_range_as_a_private_variable(template):
    context = json.loads((template / "cookiecutter.json").read_text())
    assert context["_jax_spec"] == JAX_SPEC
    pyproject = (template / PROJECT / "pyproject.toml").read_text()
    # A requirement: "jax" then extras, then a version operator or the Jinja
    # variable (not a module path such as mypy's "jax._src").
    pins = re.findall(r'"jax(?:\[[\w,]+\])?((?:[<>=!~]|\{\{)[^"]*)"', pyproject)
    assert pins, pyproject
    assert set(pins) == {"{{ cookiecutter._jax_spec }}"}, pins


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_templates_ci_tests_the_oldest_jax_in_the_range(template):
    # Workflows are copied without rendering, so the oldest version is a literal.
    workflow = (template / PROJECT / ".github" / "workflows" / "ci.yml").read_text()
    (matrix,) = re.findall(r"^\s*jax-version: (\[.*\])$", workflow, re.MULTILINE)
    oldest, *_ = json.loads(matrix)
    assert Version(oldest) == lower_bound(JAX_SPEC), matrix


def test_every_stated_range_and_tested_version_is_the_definition():
    wrong = []
    for path in text_files():
        text = path.read_text(errors="replace")
        ranges = [(m[1] or m[2]).strip().rstrip(",") for m in STATED_RANGE.finditer(text)]
        wrong += [(path, r) for r in ranges if SpecifierSet(r) != SpecifierSet(JAX_SPEC)]
        wrong += [(path, v) for v in STATED_TESTED.findall(text) if v != JAX_TESTED]
    assert wrong == [], [(str(Path(p).relative_to(REPO)), found) for p, found in wrong]
