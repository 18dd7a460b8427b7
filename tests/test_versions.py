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
from jax_ladder.versions import JAX_OLDEST, JAX_SPEC, JAX_TESTED, JAX_WINDOW, RELEASE_WINDOWS

TEMPLATES = [REPO / "templates" / r.template for r in available()]
PROJECT = "{{cookiecutter.project_name}}"
# A stated range: a requirement on jax ("jax[tpu]>=A,<B"; exact pins aside),
# or any two-sided range (JAX's is the only one the kit writes), as in prose.
STATED_RANGE = re.compile(
    r"\bjax(?:\[[\w,]+\])?((?:[<>!~]=?\s*\d[\w.*]*\s*,?\s*)+)"
    r"|(>=\s*\d[\w.]*\s*,\s*<\s*\d[\w.]*)"
)
STATED_TESTED = re.compile(r"tested on (?:jax/jaxlib |jax |jaxlib )?(\d+(?:\.\d+)+)")
SKIPPED_DIRS = {
    ".git",
    ".venv",
    ".cache",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
}
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


def test_the_definition_is_a_valid_range_holding_the_tested_version():
    assert Version(JAX_TESTED) in SpecifierSet(JAX_SPEC)


def test_the_window_is_three_consecutive_minors_newest_patch_each():
    minors = [Version(v).release[:2] for v in JAX_WINDOW]
    assert len(minors) == 3, JAX_WINDOW
    assert minors == [(minors[0][0], minors[0][1] + i) for i in range(3)], JAX_WINDOW
    assert all(Version(v) in SpecifierSet(JAX_SPEC) for v in JAX_WINDOW)
    # The range admits nothing below the oldest minor or beyond the newest.
    low, high = minors[0], minors[-1]
    assert Version(f"{low[0]}.{low[1] - 1}.99") not in SpecifierSet(JAX_SPEC)
    assert Version(f"{high[0]}.{high[1] + 1}.0") not in SpecifierSet(JAX_SPEC)


def test_the_current_release_records_the_window():
    from jax_ladder import __version__

    assert RELEASE_WINDOWS[__version__] == JAX_SPEC, "add this release to RELEASE_WINDOWS"


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
    # A compiled project also pins its build requirement to the oldest JAX
    # (issue 39: a handler built against newer FFI headers does not load in
    # an older jaxlib), jax and jaxlib both, from the private `_jax_oldest`.
    oldest = "=={{ cookiecutter._jax_oldest }}"
    assert set(pins) - {oldest} == {"{{ cookiecutter._jax_spec }}"}, pins
    compiled = (template / PROJECT / "CMakeLists.txt").exists()
    if compiled:
        assert context["_jax_oldest"] == JAX_OLDEST
        requires = pyproject.split("[project]")[0]  # [build-system] comes first
        assert f'"jax{oldest}"' in requires, requires
        assert f'"jaxlib{oldest}"' in requires, requires
        assert "{{ cookiecutter._jax_spec }}" not in requires, requires
    else:
        assert "_jax_oldest" not in context
        assert oldest not in pins, pins


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_templates_ci_tests_the_oldest_jax_in_the_range(template):
    # Workflows are copied without rendering, so the oldest version is a literal.
    workflow = (template / PROJECT / ".github" / "workflows" / "ci.yml").read_text()
    (matrix,) = re.findall(r"^\s*jax-version: (\[.*\])$", workflow, re.MULTILINE)
    oldest, *_ = json.loads(matrix)
    assert oldest == JAX_OLDEST, matrix


def within_the_window(spec: str) -> bool:
    """The window itself, or the window with a later minor as its lower bound:
    what an option that needs a newer JAX states (pallas' mosaic_gpu backend:
    >=0.11 with the window's upper bound)."""
    if SpecifierSet(spec) == SpecifierSet(JAX_SPEC):
        return True
    bounds = {s.operator: s.version for s in SpecifierSet(spec)}
    window = {s.operator: s.version for s in SpecifierSet(JAX_SPEC)}
    return (
        bounds.keys() == {">=", "<"}
        and bounds["<"] == window["<"]
        and Version(bounds[">="]) in SpecifierSet(JAX_SPEC)
    )


def test_every_stated_range_and_tested_version_is_the_definition():
    wrong = []
    for path in text_files():
        text = path.read_text(errors="replace")
        ranges = [(m[1] or m[2]).strip().rstrip(",") for m in STATED_RANGE.finditer(text)]
        wrong += [(path, r) for r in ranges if not within_the_window(r)]
        wrong += [(path, v) for v in STATED_TESTED.findall(text) if v != JAX_TESTED]
    assert wrong == [], [(str(Path(p).relative_to(REPO)), found) for p, found in wrong]


@pytest.mark.parametrize(
    ("installed", "says"),
    [
        (JAX_OLDEST, None),
        (JAX_TESTED, None),
        ("0.9.2", "no jax-ladder release supported it"),
        ("0.12.0", None),
        ("99.0", "newer than this kit has tested"),
    ],
)
def test_a_jax_outside_the_window_gets_advice(installed, says):
    from jax_ladder.versions import outside_window

    note = outside_window(installed)
    assert (note is None) if says is None else (says in note and JAX_SPEC in note), note


def test_the_advice_names_the_release_that_supported_an_older_jax(monkeypatch):
    from jax_ladder import versions

    # A later release drops 0.10: a user on 0.10 is sent to this one.
    later = ">=" + "0.11,<" + "0.14"  # (split: the stated-range check reads this file)
    monkeypatch.setitem(versions.RELEASE_WINDOWS, "9.0.0", later)
    monkeypatch.setattr(versions, "JAX_SPEC", later)
    note = versions.outside_window("0.10.2")
    newest_with_0_10 = max(
        (release for release, spec in versions.RELEASE_WINDOWS.items() if spec != later),
        key=Version,
    )
    assert f"pip install 'jax-ladder=={newest_with_0_10}'" in note, note
