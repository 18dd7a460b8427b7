"""Every baked variant is a repository a scientific-Python maintainer accepts:
sp-repo-review passes every check, zizmor finds nothing in .github/, the
workflows, the Dependabot and Read the Docs configurations are valid against
their schemas, pyproject.toml against its own, every Markdown file is as
mdformat (the project's pre-commit hook, with its .mdformat.toml) leaves it,
and the accelerator_ci option installs the chosen workflow.

Variants: every combination of the worked example's code options and the default
skeleton (conftest.EXAMPLE_AND_SKELETON), and
each non-default value of a repository option (licence, accelerator CI). They
are baked once, in one fixture, and each tool runs once over all of them (or
in this process), so that this costs about as much as the bakes; all checks
are one test, so pytest-xdist cannot spread them over workers that would each
bake again.
"""

import json
import os
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import EXAMPLE_AND_SKELETON, combination_id, repository_variants
from repo_review.processor import process
from validate_pyproject.api import Validator
from validate_pyproject.errors import ValidationError

from jax_ladder.rungs import available, template_dir
from jax_ladder.scaffold import scaffold


def accelerator_workflows(rung) -> dict[str, Path]:
    """The workflows accelerator_ci can install in a project of this template:
    the shared ones (templates/shared_files.py) but those it skips, and its
    own where it keeps one."""
    template = template_dir(rung)
    shared_files = runpy.run_path(str(template.parent / "shared_files.py"))
    shared = shared_files["package_dir"](template.parent) / "project_files" / "_accelerator_ci"
    skip = json.loads((template / "cookiecutter.json").read_text()).get("_shared_skip", [])
    found = {p.stem: p for p in shared.glob("*.yml") if f"_accelerator_ci/{p.name}" not in skip}
    own = template / "{{cookiecutter.project_name}}" / "_accelerator_ci"
    return found | {p.stem: p for p in own.glob("*.yml")}


def unstamped(text: str) -> str:
    """A shared file's text without the first line naming the kit's version."""
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# jax-ladder ") else text


VARIANTS = [param.values[0] for param in EXAMPLE_AND_SKELETON] + [
    (rung, combo) for rung in available() for combo in repository_variants(rung)
]
BIN = Path(sys.executable).parent  # the tools' console scripts, beside this Python


def tool(name, *args):
    """Run one of the tools installed with the kit's test dependencies."""
    return subprocess.run([BIN / name, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def bakes(tmp_path_factory):
    """{variant id: (rung, combo, project folder)}, each made a git repository
    as its user would (repo-review 2026.8 reads the files the same without)."""
    root = tmp_path_factory.mktemp("standard")
    projects = {}
    for rung, combo in VARIANTS:
        name = combination_id(rung, combo)
        project = scaffold(rung, root / name, combo)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        projects[name] = (rung, combo, project)
    return projects


def repo_review_failures(project: Path) -> list[str]:
    """sp-repo-review's failed checks, by this process's repo-review (as its
    command line runs them). VPP001 (validate-pyproject) is left out here only
    because the test runs the same validation with one compiled validator."""
    _, results = process(project, extend_ignore={"VPP001"})
    return [f"{r.name} ({r.description})" for r in results if r.result is False]


def test_every_variant_meets_the_repository_standard(bakes):
    problems = []
    failed_checks = {}  # sp-repo-review check: the variants that fail it
    validate = Validator()
    for name, (rung, combo, project) in bakes.items():
        for check in repo_review_failures(project):
            failed_checks.setdefault(check, []).append(name)
        try:
            validate(tomllib.loads((project / "pyproject.toml").read_text()))
        except ValidationError as error:
            problems.append(f"{name}: validate-pyproject: {error}")
        # The accelerator_ci option: the chosen workflow, as the template has it.
        choice = combo.get("accelerator_ci", "none")
        installed = project / ".github" / "workflows" / "accelerator.yml"
        if (project / "_accelerator_ci").exists():
            problems.append(f"{name}: _accelerator_ci/ was left in the project")
        if choice == "none":
            if installed.exists():
                problems.append(f"{name}: accelerator.yml installed without accelerator_ci")
        else:
            source = accelerator_workflows(rung)[choice]
            if not installed.is_file():
                problems.append(f"{name}: no .github/workflows/accelerator.yml")
            elif unstamped(installed.read_text()) != source.read_text():
                problems.append(f"{name}: accelerator.yml is not _accelerator_ci/{choice}.yml")

    problems += [f"sp-repo-review {check} fails in {v}" for check, v in failed_checks.items()]
    projects = [project for _, _, project in bakes.values()]
    workflows = [str(p) for project in projects for p in project.glob(".github/workflows/*.yml")]
    for args in (
        ["zizmor", "--offline", "--no-progress", *(str(p / ".github") for p in projects)],
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows],
        ["check-jsonschema", "--builtin-schema", "vendor.dependabot"]
        + [str(p / ".github" / "dependabot.yml") for p in projects],
        ["check-jsonschema", "--builtin-schema", "vendor.readthedocs"]
        + [str(p / ".readthedocs.yaml") for p in projects if (p / ".readthedocs.yaml").exists()],
        # Each file with the .mdformat.toml of its project, as pre-commit runs it.
        ["mdformat", "--check"]
        + [str(p) for project in projects for p in project.rglob("*.md") if ".git" not in p.parts],
    ):
        if args[-1].startswith("vendor."):
            continue  # no file of that kind in any variant
        result = tool(*args)
        if result.returncode != 0:
            problems.append(f"{args[0]}:\n{result.stdout[-6000:]}{result.stderr[-3000:]}")
    assert problems == [], "\n".join(problems)


def test_require_accelerator_turns_skips_into_failures(tmp_path):
    """tests/conftest.py (the same in every template): with REQUIRE_ACCELERATOR
    set, the run stops unless JAX's default backend is that platform, and a
    skipped test fails with its reason; without it, nothing changes. A plugin
    stands in for a GPU by making jax.default_backend() answer "gpu"."""
    project = scaffold(next(r for r in available() if r.name == "custom-vjp"), tmp_path, {})
    probe = project / "tests" / "test_probe.py"
    probe.write_text(
        "import pytest\n\n\n"
        "def test_runs():\n    pass\n\n\n"
        "def test_skips():\n    pytest.skip('needs a flux capacitor')\n\n\n"
        "@pytest.mark.xfail(reason='known', strict=True)\n"
        "def test_expected_failure():\n    raise AssertionError\n"
    )
    (tmp_path / "pretend_gpu.py").write_text("import jax\n\njax.default_backend = lambda: 'gpu'\n")

    def pytest_run(*plugin, **env):
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin]
        environ = {k: v for k, v in os.environ.items() if k != "REQUIRE_ACCELERATOR"}
        environ["PYTHONPATH"] = os.pathsep.join([str(project / "src"), str(tmp_path)])
        return subprocess.run(
            [*command, "-rA", str(probe)],
            cwd=project,
            env=environ | env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    plain = pytest_run()
    assert plain.returncode == 0, plain.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in plain.stdout, plain.stdout

    on_cpu = pytest_run(REQUIRE_ACCELERATOR="gpu")
    assert on_cpu.returncode != 0
    assert "REQUIRE_ACCELERATOR=gpu, but JAX's default backend is cpu" in on_cpu.stderr

    unknown = pytest_run(REQUIRE_ACCELERATOR="cuda")
    assert unknown.returncode != 0
    assert "REQUIRE_ACCELERATOR='cuda': use gpu or tpu" in unknown.stderr

    on_gpu = pytest_run("-p", "pretend_gpu", REQUIRE_ACCELERATOR="gpu")
    assert on_gpu.returncode == 1, on_gpu.stdout
    assert "1 failed, 1 passed, 1 xfailed" in on_gpu.stdout, on_gpu.stdout
    assert "skipped on gpu, where every test must run: needs a flux capacitor" in on_gpu.stdout


def test_every_template_offers_the_accelerator_workflows_it_ships():
    """accelerator_ci's choices are exactly the workflows under _accelerator_ci/."""
    from jax_ladder.options import load_options

    for rung in available():
        choices = load_options(template_dir(rung))["accelerator_ci"].choices
        assert choices[0] == "none", rung.name
        assert sorted(choices[1:]) == sorted(accelerator_workflows(rung)), rung.name
