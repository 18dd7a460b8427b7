"""jax_ladder.versions is the one definition of the supported JAX range; every
other place that states it (packaging, scripts, templates, CI, prose) must agree."""

import ast
import io
import json
import re
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest
from conftest import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jax_ladder.rungs import available
from jax_ladder.versions import (
    HIJAX_JAX_OLDEST,
    HIJAX_JAX_SPEC,
    JAX_OLDEST,
    JAX_ON_PYTHON_OLDEST,
    JAX_SPEC,
    JAX_TESTED,
    JAX_WINDOW,
    PYTHON_OLDEST,
    RELEASE_WINDOWS,
)

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


def test_the_kits_dependency_and_its_ffi_examples_build_use_the_range():
    """The kit depends on the range; its default build needs no JAX (it compiles
    nothing), and the build that compiles its FFI examples (scripts/_env.sh, without
    isolation) installs the range first."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    build = [Requirement(r).name for r in pyproject["build-system"]["requires"]]
    assert build == ["scikit-build-core"], build
    requirements = pyproject["project"]["dependencies"]
    jax = [Requirement(r) for r in requirements if Requirement(r).name == "jax"]
    env = re.findall(r'"(jax[^"]*)"', (REPO / "scripts" / "_env.sh").read_text())
    jax += [Requirement(r) for r in env if Requirement(r).name == "jax"]
    assert len(jax) == 2, (requirements, env)
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
    # internals' api=hijax pins its own floor (test_a_hijax_project_requires_...).
    hijax = "{{ cookiecutter._hijax_jax_spec }}"
    assert set(pins) - {oldest, hijax} == {"{{ cookiecutter._jax_spec }}"}, pins
    assert (hijax in pins) == (template.name == "internals"), pins
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


def test_a_hijax_project_requires_the_jax_that_has_hiprim(tmp_path):
    """internals' api=hijax subclasses jax.experimental.hijax.HiPrim, new in
    JAX 0.11: its project requires that floor, with the window's upper bound
    (it pinned the whole window, so on Python 3.11 pip installed JAX 0.10 and
    the project could not import)."""
    from jax_ladder.rungs import by_name
    from jax_ladder.scaffold import scaffold

    template = REPO / "templates" / "internals"
    assert json.loads((template / "cookiecutter.json").read_text())["_hijax_jax_spec"] == (
        HIJAX_JAX_SPEC
    )
    floor = {s.operator: s.version for s in SpecifierSet(HIJAX_JAX_SPEC)}[">="]
    assert floor == HIJAX_JAX_OLDEST
    assert within_the_window(HIJAX_JAX_SPEC)
    assert JAX_OLDEST not in SpecifierSet(HIJAX_JAX_SPEC)
    for api, spec in (("hijax", HIJAX_JAX_SPEC), ("extend", JAX_SPEC)):
        project = scaffold(by_name("internals"), tmp_path / api, {"api": api})
        pyproject = tomllib.loads((project / "pyproject.toml").read_text())
        requirements = map(Requirement, pyproject["project"]["dependencies"])
        (jax,) = [r for r in requirements if r.name == "jax"]
        assert jax.specifier == SpecifierSet(spec), (api, str(jax))


def ci_workflow(template) -> str:
    """The ci.yml a project of this template gets: the template's own where it
    keeps one, else every project's shared one (templates/shared_files.py)."""
    own = template / PROJECT / ".github" / "workflows" / "ci.yml"
    shared = REPO / "src" / "jax_ladder" / "project_files" / ".github" / "workflows" / "ci.yml"
    return (own if own.is_file() else shared).read_text()


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_templates_ci_tests_the_oldest_jax_in_the_range(template):
    # Workflows are copied without rendering, so the oldest version is a literal.
    workflow = ci_workflow(template)
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


# --- The oldest Python (PYTHON_OLDEST) ---------------------------------------------
def newer_syntax(text: str, oldest: str = PYTHON_OLDEST) -> str | None:
    """Why `text` is not valid Python `oldest` ("3.11"), or None. ast's
    feature_version rejects PEP 695 (3.12: `type X = ...`, `def f[T]`), but not
    PEP 701's f-strings (3.12), which only the tokens show: a quote that an
    enclosing f-string uses, a backslash, a comment or a line break inside a
    replacement field."""
    major, minor = map(int, oldest.split("."))
    try:
        ast.parse(text, feature_version=(major, minor))
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"
    start = getattr(tokenize, "FSTRING_START", None)
    if start is None or sys.version_info[:2] <= (major, minor):
        return None  # this Python's own f-strings: ast.parse has judged them
    quotes: list[str] = []  # the open f-strings' quotes, outermost first
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        inside, line = bool(quotes), token.start[0]
        if token.type in (start, tokenize.STRING) and inside:
            quote = token.string.lstrip("rRbBuUfF")[:3]
            quote = quote if quote in ('"""', "'''") else quote[0]
            if any(quote == q or (len(q) == 1 and quote[0] == q) for q in quotes):
                return f"line {line}: an f-string reuses its enclosing f-string's quote"
        outer_literal = token.type == tokenize.FSTRING_MIDDLE and len(quotes) == 1
        if inside and "\\" in token.string and not outer_literal:
            return f"line {line}: a backslash inside an f-string's replacement field"
        if inside and token.type == tokenize.COMMENT:
            return f"line {line}: a comment inside an f-string's replacement field"
        if inside and token.type == tokenize.NL and len(quotes[-1]) == 1:
            return f"line {line}: a line break inside a one-line f-string's field"
        if token.type == start:
            quote = token.string.lstrip("rRbBuUfF")
            quotes.append(quote)
        elif token.type == tokenize.FSTRING_END:
            quotes.pop()
    return None


@pytest.mark.parametrize(
    ("source", "newer"),
    [
        ("type X = int\n", True),
        ("def f[T](x: T) -> T:\n    return x\n", True),
        ("class C[T]:\n    pass\n", True),
        ('x = f"{\'a\' + "b"}"\n', True),
        ("x = f'{\"\\n\".join(a)}'\n", True),
        ("x = f'{a # no\n}'\n", True),
        ("from typing import TypeAlias\n\nX: TypeAlias = int\n", False),
        ("x = f\"{'a' + 'b'!r:>{w}} {d['k']}\"\ny = f'''{\"a\"}'''\nz = f'\\n{a}'\n", False),
    ],
)
def test_newer_syntax_finds_what_the_oldest_python_cannot_parse(source, newer):
    assert (newer_syntax(source) is not None) == newer, newer_syntax(source)


def kit_python_files():
    """The kit's own Python (its package, tests, examples, adapted projects,
    docs extension and scripts); the templates' is checked baked."""
    for path in sorted(REPO.rglob("*")):
        relative = path.relative_to(REPO)
        parts = set(relative.parts)
        if parts & SKIPPED_DIRS or relative.parts[0] == "templates" or not path.is_file():
            continue
        script = path.parent == REPO / "scripts" and path.read_bytes().startswith(
            b"#!/usr/bin/env python"
        )
        if path.suffix == ".py" or script:
            yield path


def test_the_kits_python_parses_on_the_oldest_python():
    # requires-python admits PYTHON_OLDEST, so everything the kit runs or
    # copies must be that Python's syntax (test_templates.py: the baked ones).
    problems = [
        f"{path.relative_to(REPO)}: {why}"
        for path in kit_python_files()
        if (why := newer_syntax(path.read_text()))
    ]
    assert problems == []


def test_every_python_version_is_the_oldest_supported():
    assert re.fullmatch(r"3\.\d+", PYTHON_OLDEST), "scripts/_env.sh reads it with sed"
    oldest = Version(PYTHON_OLDEST)
    kit = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert kit["project"]["requires-python"] == f">={PYTHON_OLDEST}"
    assert kit["tool"]["mypy"]["python_version"] == PYTHON_OLDEST
    assert "target-version" not in kit["tool"]["ruff"]  # ruff reads requires-python
    from jax_ladder.doctor import MIN_PYTHON

    assert oldest == MIN_PYTHON
    for template in TEMPLATES:
        project = template / PROJECT
        text = (project / "pyproject.toml").read_text()
        assert f'requires-python = ">={PYTHON_OLDEST}"' in text, template.name
        assert f'python_version = "{PYTHON_OLDEST}"' in text, template.name
        assert "target-version" not in text, template.name
        classifiers = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text)
        assert min(classifiers, key=Version) == PYTHON_OLDEST, (template.name, classifiers)
        for build in re.findall(r"^build = (\[.*\])$", text, re.MULTILINE):  # cibuildwheel
            tag = "cp" + PYTHON_OLDEST.replace(".", "")
            assert min(json.loads(build)) == f"{tag}-*", (template.name, build)
        # The templates' CI runs the oldest Python with the oldest JAX (the
        # newer JAX has no wheels there).
        workflow = ci_workflow(template)
        include = f'- python-version: "{PYTHON_OLDEST}"\n            jax-version: "{JAX_OLDEST}"'
        assert include in workflow, template.name
        readme = (project / "README.md").read_text()
        assert f"Python {PYTHON_OLDEST}" in readme, template.name
        assert f"JAX {JAX_ON_PYTHON_OLDEST}" in readme, template.name
    cmake = [
        *REPO.glob("templates/*/*/CMakeLists.txt"),
        *REPO.glob("examples/*/CMakeLists.txt"),
        *REPO.glob("examples/shared/*.cmake"),
    ]
    for path in [REPO / "CMakeLists.txt", *cmake]:
        for version in re.findall(r"find_package\(Python (\d+\.\d+)", path.read_text()):
            assert version == PYTHON_OLDEST, path
    versions = (REPO / "docs" / "versions.md").read_text()
    assert f"Python ≥ {PYTHON_OLDEST}; JAX `{JAX_SPEC}`" in versions
    assert f"On Python {PYTHON_OLDEST} that range gives JAX {JAX_ON_PYTHON_OLDEST}" in versions
    readme = (REPO / "README.md").read_text()
    assert f"Python ≥ {PYTHON_OLDEST} and JAX `{JAX_SPEC}`" in readme
