"""`jax-ladder update` takes a template change into a project its owner edited,
and refuses, changing nothing, where it cannot; the cruft route works too."""

import json
import os
import runpy
import shutil
import subprocess
import sys

import pytest
from conftest import run_cli

from jax_ladder import __version__
from jax_ladder import update as updating
from jax_ladder.generation import (
    ANSWERS_FILE,
    BASE_FILE,
    project_files,
    read_base,
    read_generation,
    record,
)
from jax_ladder.rungs import available, by_name, template_dir
from jax_ladder.runner import run_project_tests
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_SPEC

GIT = ["git", "-c", "user.name=owner", "-c", "user.email=owner@example.org"]
OP = "src/safe_distances/pairwise_distances.py"
# The templates `jax-ladder new` used (the installed kit's), which the tests'
# changed copies start from.
KIT_TEMPLATES = template_dir(by_name("custom-vjp")).parent
# The package beside them, whose opcheck/ and project_files/ every project
# shares (templates/shared_files.py).
KIT_PACKAGE = runpy.run_path(str(KIT_TEMPLATES / "shared_files.py"))["package_dir"](KIT_TEMPLATES)
DROPPED = "benchmarks/bench.py"  # the file the changed template removes


def copy_kit(kit):
    """The kit's templates and the shared files they write into projects, laid out
    as in a clone (templates/, src/jax_ladder/)."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(KIT_TEMPLATES, kit / "templates", ignore=ignore)
    package = kit / "src" / "jax_ladder"
    for part in ("opcheck", "project_files"):
        shutil.copytree(KIT_PACKAGE / part, package / part, ignore=ignore)
    shutil.copy2(KIT_PACKAGE / "__init__.py", package / "__init__.py")
    return kit


def git(project, *args):
    return subprocess.run([*GIT, *args], cwd=project, check=True, capture_output=True, text=True)


def commit_all(project, message):
    git(project, "add", "-A")
    git(project, "commit", "-qm", message)


@pytest.fixture
def project(tmp_path):
    path = scaffold(by_name("custom-vjp"), tmp_path / "out", {})
    git(path, "init", "-q")
    commit_all(path, "generated")
    return path


def prepend(path, line):
    path.write_text(line + "\n" + path.read_text())


def changed_kit(tmp_path):
    """A copy of the kit's templates with one change of each kind."""
    kit = copy_kit(tmp_path / "kit")
    template = kit / "templates" / "custom-vjp"
    root = template / "{{cookiecutter.project_name}}"
    # A fix in a file the owner did not touch (one every project shares), and
    # one in a file they did.
    conftest = kit / "src" / "jax_ladder" / "project_files" / "tests" / "conftest.py"
    conftest.write_text("# Fixed upstream.\n" + conftest.read_text())
    op = root / "src/{{cookiecutter.package_name}}/{{cookiecutter.op_name}}.py"
    op.write_text(op.read_text() + "\n# Template fix at the end of the op module.\n")
    # Both change the README's first line: a conflict.
    readme = root / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    readme.write_text("".join(["# Template's new title\n", *lines[1:]]))
    # A new file, a removed one, a new option (rendered into the new file).
    options = json.loads((template / "cookiecutter.json").read_text())
    options["citation_title"] = "Safe distances"
    (template / "cookiecutter.json").write_text(json.dumps(options, indent=2))
    (root / "CITATION.cff").write_text("title: {{ cookiecutter.citation_title }}\n")
    (root / DROPPED).unlink()
    return template


def test_update_takes_template_changes_and_keeps_the_owners_edits(tmp_path, project):
    # The owner changes the op, adds a test, edits the README.
    op = project / OP
    op.write_text("# Owner's note at the top of the op module.\n" + op.read_text())
    (project / "tests/test_owner.py").write_text("def test_owner():\n    assert True\n")
    readme = project / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    readme.write_text("".join(["# Owner's title\n", *lines[1:]]))
    commit_all(project, "owner edits")

    template = changed_kit(tmp_path)
    renders = updating.load(project, template=template)
    plan = updating.apply(project, renders)

    assert plan.updated == ["tests/conftest.py"]
    assert plan.added == ["CITATION.cff"]
    assert plan.removed == [DROPPED]
    assert plan.merged == [OP]
    assert plan.conflicts == ["README.md"]
    assert plan.attention == []
    assert (project / "CITATION.cff").read_text() == "title: Safe distances\n"
    assert not (project / DROPPED).exists()
    text = op.read_text()
    assert text.startswith("# Owner's note")
    assert text.endswith("# Template fix at the end of the op module.\n")
    assert (project / "tests/test_owner.py").is_file()
    readme_text = readme.read_text()
    assert "<<<<<<< yours\n# Owner's title\n" in readme_text
    assert "# Template's new title\n>>>>>>> template now" in readme_text
    answers = json.loads((project / ANSWERS_FILE).read_text())
    assert answers["answers"]["citation_title"] == "Safe distances"

    # The owner resolves the conflict; the project's tests pass (a smoke
    # selection: the merged op imports and matches its oracles; every test of
    # the same code runs in test_templates.py); now current.
    head, _, rest = readme_text.partition("<<<<<<<")
    readme.write_text(head + "# Owner's title\n" + rest.partition(">>>>>>> template now\n")[2])
    smoke = ("tests/test_reference.py", "tests/test_conformance.py::test_cell[vjp]")
    run = run_project_tests(project, code=project / "src", extra_args=smoke)
    assert run.ok, run.output[-3000:]
    commit_all(project, "update")
    assert updating.template_changes(updating.load(project, template=template)) == []


def test_an_owner_edit_to_a_file_the_template_dropped_is_kept_and_reported(tmp_path, project):
    prepend(project / DROPPED, "# The owner's line.")
    commit_all(project, "owner edits a file the template will drop")
    template = changed_kit(tmp_path)
    plan = updating.apply(project, updating.load(project, template=template))
    assert (project / DROPPED).is_file()
    assert [line.split(":")[0] for line in plan.attention] == [DROPPED]


def test_check_and_diff_from_the_command_line(tmp_path, project):
    result = run_cli("update", "--check", str(project), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    # A current project's diff is empty: say so rather than print nothing.
    result = run_cli("update", "--diff", str(project), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{project.name}: up to date with jax-ladder {__version__}; no diff\n"

    # A stale project: its base says the template once rendered the README
    # differently (as if generated by an older kit).
    base = read_base(project)
    base["README.md"] = (b"old template README\n", False)
    record(project, read_generation(project), base)
    commit_all(project, "stale")
    result = run_cli("update", "--check", str(project), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.count("\n") == 1
    assert "README.md" in result.stdout
    result = run_cli("update", "--diff", str(project), cwd=tmp_path)
    assert result.returncode == 0
    assert "-old template README" in result.stdout


def corrupt_answers(project):
    (project / ANSWERS_FILE).write_text("{not json")
    commit_all(project, "corrupt")


def newer_kit(project):
    answers = json.loads((project / ANSWERS_FILE).read_text())
    answers["kit_version"] = "999.0"
    (project / ANSWERS_FILE).write_text(json.dumps(answers))
    commit_all(project, "newer")


def corrupt_base(project):
    (project / BASE_FILE).write_bytes(b"not a tarball")
    commit_all(project, "corrupt base")


def uncommitted(project):
    prepend(project / OP, "# Uncommitted.")


def untracked(project):
    (project / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")


def not_generated(project):
    shutil.rmtree(project / ".jax-ladder")
    commit_all(project, "no state")


def not_in_git(project):
    shutil.rmtree(project / ".git")


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (not_generated, "jax-ladder update --adopt"),
        (uncommitted, "has uncommitted changes"),
        (untracked, "untracked files"),
        (not_in_git, "is not in a git repository"),
        (newer_kit, "newer than this one"),
        (corrupt_answers, "answers.json is corrupted"),
        (corrupt_base, "base.tar.gz is missing or corrupted"),
    ],
)
def test_refusals_are_one_line_exit_2_and_change_nothing(tmp_path, project, spoil, message):
    spoil(project)
    before = project_files(project.parent)
    result = run_cli("update", "--no-input", str(project), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert project_files(project.parent) == before


# Generated data cruft must not patch (README: the `skip` list), per rung.
CRUFT_SKIP = {"export": ["tests/golden"]}


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_cruft_route_from_a_local_clone_offline(tmp_path, rung):
    """A project made with cruft from a clone of the kit: `cruft check` flags a
    template change, `cruft update` applies it, with the skip list the
    project's README gives (no rejected hunk, no half-patched data)."""
    kit = copy_kit(tmp_path / "kit")
    git(kit, "init", "-q")
    commit_all(kit, "kit")
    cruft = [sys.executable, "-m", "cruft"]
    out = tmp_path / "out"
    out.mkdir()
    create = [*cruft, "create", str(kit), "--directory", f"templates/{rung.name}", "--no-input"]
    subprocess.run(create, cwd=out, check=True, capture_output=True)
    (project,) = out.iterdir()
    state = json.loads((project / ".cruft.json").read_text())
    state["skip"] = CRUFT_SKIP.get(rung.name, [])
    (project / ".cruft.json").write_text(json.dumps(state, indent=2))
    git(project, "init", "-q")
    commit_all(project, "generated")
    check = subprocess.run([*cruft, "check"], cwd=project, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    spec = kit / f"templates/{rung.name}/{{{{cookiecutter.project_name}}}}/tests/op_spec.py"
    spec.write_text(spec.read_text() + "\n# Template fix.\n")
    commit_all(kit, "fix")
    check = subprocess.run([*cruft, "check"], cwd=project, capture_output=True, text=True)
    assert check.returncode != 0
    subprocess.run([*cruft, "update", "-y"], cwd=project, check=True, capture_output=True)
    assert (project / "tests/op_spec.py").read_text().endswith("# Template fix.\n")
    assert sorted(project.rglob("*.rej")) == []
    assert git(project, "status", "--porcelain", "tests/golden").stdout == ""


def test_the_projects_tests_say_when_jax_is_outside_the_pinned_range(project):
    def header():
        command = [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider"]
        env = {**os.environ, "PYTHONPATH": str(project / "src")}
        result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-2000:]
        return [line for line in result.stdout.splitlines() if "outside the range" in line]

    assert header() == []
    pyproject = project / "pyproject.toml"
    pinned = pyproject.read_text()
    assert pinned.count(f'"jax{JAX_SPEC}"') == 1
    future = "==99.0"  # a JAX that does not exist yet
    pyproject.write_text(pinned.replace(f'"jax{JAX_SPEC}"', f'"jax{future}"'))
    (line,) = header()
    assert f"({future})" in line
    assert "jax-ladder update" in line


def test_update_keeps_saved_derived_answers_such_as_the_copyright_year(tmp_path):
    # copyright_year defaults to the year of generation: an update in a later
    # year must render the saved one, not today's.
    given = {"license": "MIT", "copyright_year": "2020"}
    project = scaffold(by_name("custom-vjp"), tmp_path, given)
    assert "Copyright (c) 2020 " in (project / "LICENSE").read_text()
    assert updating.template_changes(updating.load(project)) == []
