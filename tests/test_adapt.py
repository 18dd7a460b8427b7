"""A starter becomes the user's own op in the files its adapt table marks
theirs (issue 25): the README's table is current, another op name leaves no
trace of the example, the skeleton marks exactly those files, and a second op
the kit does not ship passes the whole generated suite after writing only them.

The second ops live in tests/adapted/<rung>/: `recipe.toml` (the options to
bake with, the optional files the op does not use, why this op) and `files/`,
the op's files at their generated paths.
"""

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import adapt
import mutation
import pytest
from conftest import REPO, assert_lint_clean, battery

from jax_ladder.options import load_options
from jax_ladder.rungs import available, template_dir
from jax_ladder.runner import run_project_tests
from jax_ladder.scaffold import scaffold

RUNGS = [pytest.param(rung, id=rung.name) for rung in available()]
ADAPTED = REPO / "tests" / "adapted"
# The files a second op may write: the reference, the extension and the
# declaration; ffi's op is also its C++ kernel.
MOST_FILES = {"ffi": 4}
THEIRS = {"yours", "declaration"}
WRITE_TABLE = (
    "import sys; sys.path.insert(0, 'tests'); import support_table as t; "
    "from op_spec import SPEC; text = t.README.read_text(); "
    "t.README.write_text(text.replace(t.current_block(text), t.render(SPEC)))"
)


def example_of(rung) -> str:
    return str(load_options(template_dir(rung))["example"].choices[0])


def spellings(name: str) -> set[str]:
    """How an op name can appear in code: rms_norm, RMS_NORM, RmsNorm, rms-norm."""
    words = name.split("_")
    return {name, name.upper(), "".join(w.title() for w in words), "-".join(words)}


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    return None if b"\0" in data else data.decode(errors="replace")


@pytest.mark.parametrize("rung", RUNGS)
def test_readme_adapt_table_is_the_one_adapt_toml_renders(rung):
    readme = adapt.readme_path(template_dir(rung)).read_text()
    assert adapt.START in readme, f"{rung.name}: README has no {adapt.START} block"
    wanted = adapt.readme_with_table(readme, adapt.load(template_dir(rung)))
    assert readme == wanted, f"run: python tests/adapt.py --write templates/{rung.name}"


@pytest.mark.parametrize("rung", RUNGS)
def test_another_op_name_leaves_no_trace_of_the_example(tmp_path, rung):
    op = "zz_other_op"
    project = scaffold(rung, tmp_path, {"project_name": "trace-check", "op_name": op})
    entries = adapt.load(template_dir(rung))
    options = {"example": example_of(rung)}
    traces = []
    for relative in adapt.generated_files(project):
        entry = adapt.role_of(relative, entries, options, "trace_check", op)
        if entry is not None and entry.role == "yours":
            continue  # the example's own mathematics
        if relative.startswith(".jax-ladder/"):
            continue  # the kit's record of the answers, `example` among them
        text = text_of(project / relative) or ""
        traces += [
            f"{relative}: {spelling}"
            for spelling in spellings(example_of(rung))
            if spelling in relative or re.search(rf"\b{re.escape(spelling)}\b", text)
        ]
    assert traces == []


@pytest.mark.parametrize("rung", RUNGS)
def test_skeleton_marks_todo_in_exactly_the_files_that_are_yours(tmp_path, rung):
    project = scaffold(rung, tmp_path, {"example": "none"})
    options = {"example": "none"}
    entries = adapt.load(template_dir(rung))
    package = mutation.package_of(project)
    op = mutation.op_name_of(template_dir(rung), options)
    marked, theirs = set(), set()
    for relative in adapt.generated_files(project):
        entry = adapt.role_of(relative, entries, options, package, op)
        if entry is not None and entry.role in THEIRS:
            theirs.add(relative)
        if "TODO" in (text_of(project / relative) or ""):
            marked.add(relative)
    assert marked == theirs


# What each worked example claims, besides its name: words that a skeleton's
# README and docstrings outside the files marked theirs must not use.
EXAMPLE_CLAIMS = {
    "ffi": ["RMS", "normalisation", "huge_pages"],
    "pallas": ["GELU", "bias", "epilogue"],
    "custom-vjp": ["Euclidean", "distances"],
    "custom-partitioning": ["top-k"],
    "export": ["classifier"],
    "internals": ["tridiagonal"],
    "memory-and-sharding": ["MLP", "tanh"],
}
# The skeleton's own op (an identity, a square) is described only where its
# TODO markers say to replace it, in the files marked theirs.
SKELETON_CLAIMS = ["identity", "x * 1", "x * x"]
DOCUMENTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def docstrings(source: str) -> str:
    """The module's, classes' and functions' docstrings of a Python source."""
    tree = ast.parse(source)
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, DOCUMENTED))]
    return "\n".join(ast.get_docstring(n) or "" for n in nodes)


def support_table_of(readme: str) -> str:
    """The README's support table block, written from tests/op_spec.py."""
    start, end = "<!-- support-table", "<!-- /support-table -->"
    return readme[readme.index(start) : readme.index(end)]


def test_every_rung_lists_its_example_claims():
    assert set(EXAMPLE_CLAIMS) == {rung.name for rung in available()}


@pytest.mark.parametrize("rung", RUNGS)
def test_skeleton_readme_and_docstrings_claim_nothing_of_a_starter_op(tmp_path, rung):
    """The README and the machinery's docstrings are marked leave, so they must
    stay true once the op is the user's: a skeleton's never name the worked
    example or repeat its claims, and never describe the skeleton's own op."""
    project = scaffold(rung, tmp_path, {"project_name": "claim-check", "example": "none"})
    options = {"example": "none"}
    entries = adapt.load(template_dir(rung))
    op = mutation.op_name_of(template_dir(rung), options)
    words = [*spellings(example_of(rung)), *EXAMPLE_CLAIMS[rung.name], *SKELETON_CLAIMS]
    claims = []
    for relative in adapt.generated_files(project):
        entry = adapt.role_of(relative, entries, options, "claim_check", op)
        if entry is not None and entry.role in THEIRS:
            continue
        if relative == "README.md":  # less its support table, which the tests regenerate
            text = (project / relative).read_text()
            text = text.replace(support_table_of(text), "")
        elif relative.startswith("src/") and relative.endswith(".py"):
            text = docstrings((project / relative).read_text())
        else:
            continue
        claims += [
            f"{relative}: {word}"
            for word in words
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)
        ]
    assert claims == []


def recipe_of(rung) -> dict:
    return tomllib.loads((ADAPTED / rung.name / "recipe.toml").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    "rung", [pytest.param(r, id=r.name, marks=battery(r)) for r in available()]
)
def test_a_second_op_needs_only_the_files_marked_yours(tmp_path, rung):
    """Bake the worked example under the second op's name, delete what the
    recipe says it does not use (only files marked optional), write the
    second op's files (only files marked yours or declaration, at most three)
    and run the whole generated suite, the conformance matrix included."""
    adapt_and_run(tmp_path, rung, recipe_of(rung), ADAPTED / rung.name / "files")


def adapt_and_run(tmp_path, rung, recipe: dict, files: Path) -> None:
    """Bake `rung` with the recipe's options, delete its optional files,
    write `files` (only files marked yours or declaration) and run the whole
    generated suite."""
    options = {"project_name": recipe["project_name"], **recipe.get("options", {})}
    project = scaffold(rung, tmp_path, options)
    package = mutation.package_of(project)
    op = str(options["op_name"])
    defaults = {k: str(o.default) for k, o in load_options(template_dir(rung)).items() if o.choices}
    combo = {**defaults, **{k: str(v) for k, v in options.items()}}
    entries = adapt.load(template_dir(rung))

    def role(relative):
        entry = adapt.role_of(relative, entries, combo, package, op)
        return entry.role if entry else None

    for relative in recipe.get("delete", []):
        assert role(relative) == "optional", f"{relative} is deleted but not marked optional"
        (project / relative).unlink()
    written = sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file())
    assert {r: role(r) for r in written if role(r) not in THEIRS} == {}
    assert len(written) <= MOST_FILES.get(rung.name, 3), written
    shutil.copytree(files, project, dirs_exist_ok=True)

    assert_lint_clean(project)
    built = mutation.Project(project, op)  # builds a compiled project into src/
    # The README's support table, from the new declaration (what a user's
    # `python tests/support_table.py` writes once the cells pass; the run
    # below checks every cell and that the table matches them).
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    subprocess.run([sys.executable, "-c", WRITE_TABLE], cwd=project, env=env, check=True)
    run = run_project_tests(project, code=project / "src")
    assert run.ok, run.output[-5000:]
    # The bugs the recipe plants (a softmax without its max subtraction, say):
    # the default declaration's cells must catch each one.
    try:
        for entry in recipe.get("mutant", []):
            planted = mutation.Mutant(**{**entry, "tests": tuple(entry["tests"])})
            outcome = built.run_mutant(planted)
            assert outcome.valid, f"{planted.name}: {outcome.detail}"
            assert outcome.killed, f"{planted.name} survived its tests"
    finally:
        built.close()
