"""The generated projects' CI (project_files/.github/workflows/ci.yml): one
workflow for every project, copied without rendering, so its JAX matrix can
name a JAX that a project's own requirement excludes (internals' api=hijax
requires JAX 0.11: HIJAX_JAX_SPEC). Such a job must say so and skip its
install and test steps, not fail to install; every other job runs them.

The guard step runs as written, in bash as GitHub runs a `run:` step, in the
baked project, with GITHUB_OUTPUT and GITHUB_STEP_SUMMARY as the runner gives
them. Its `python` is the kit's own (which has packaging, so the step's
`pip install packaging` needs no network).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jax_ladder.rungs import by_name
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import HIJAX_JAX_OLDEST, JAX_OLDEST, JAX_TESTED

# How GitHub runs a `run:` step on Linux (shell: bash), as tests/test_release_steps.py.
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
GUARD = "jax"  # the guard step's id


def ci_tests_job(project: Path) -> dict:
    workflow = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text())
    return workflow["jobs"]["tests"]


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    root = tmp_path_factory.mktemp("ci")
    return {
        api: scaffold(by_name("internals"), root / api, {"api": api}) for api in ("hijax", "extend")
    }


def guard(project: Path, jax_version: str, tmp_path: Path) -> tuple[dict[str, str], str, str]:
    """Run the guard step of the tests job for this matrix JAX: its outputs,
    its step summary, its log."""
    job = ci_tests_job(project)
    (step,) = [s for s in job["steps"] if s.get("id") == GUARD]
    assert step["env"] == {"JAX_VERSION": "${{ matrix.jax-version }}"}, step["env"]
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.touch()
    summary.touch()
    tools = tmp_path / "bin"
    tools.mkdir()
    python = tools / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    result = subprocess.run(
        [*SHELL, "-c", step["run"]],
        cwd=project,
        env={
            "PATH": os.pathsep.join([str(tools), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": os.environ.get("HOME", str(tmp_path)),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INDEX": "1",  # packaging is there already: no network
            "JAX_VERSION": jax_version,
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, summary.read_text(), result.stdout


@pytest.mark.parametrize(
    ("api", "jax_version", "allowed"),
    [
        ("hijax", JAX_OLDEST, False),
        ("hijax", JAX_TESTED, True),
        ("hijax", "latest", True),
        ("extend", JAX_OLDEST, True),
        ("extend", "latest", True),
    ],
)
def test_a_job_whose_jax_the_project_excludes_says_so_and_skips(
    projects, api, jax_version, allowed, tmp_path
):
    outputs, summary, log = guard(projects[api], jax_version, tmp_path)
    assert outputs == {"allowed": str(allowed).lower()}, (outputs, log)
    if allowed:
        assert summary == "", summary
    else:
        assert f"excludes JAX {jax_version}" in summary, summary
        assert f"jax>={HIJAX_JAX_OLDEST}" in summary, summary
        assert f"::notice title=JAX {jax_version} not tested::" in log, log


def test_every_step_after_the_guard_runs_only_where_it_allows():
    shared = Path(__file__).resolve().parents[1] / "src" / "jax_ladder" / "project_files"
    steps = ci_tests_job(shared)["steps"]
    (index,) = [i for i, s in enumerate(steps) if s.get("id") == GUARD]
    assert all("uses" in s for s in steps[:index]), steps[:index]  # checkout, setup-python
    for step in steps[index + 1 :]:
        assert step.get("if") == f"steps.{GUARD}.outputs.allowed == 'true'", step
    # The job's matrix still names the oldest JAX: the guard is what skips it.
    assert JAX_OLDEST in ci_tests_job(shared)["strategy"]["matrix"]["jax-version"]


def test_the_guard_step_reads_the_matrix_only_through_env():
    """zizmor's template-injection rule: no ${{ }} inside run:."""
    shared = Path(__file__).resolve().parents[1] / "src" / "jax_ladder" / "project_files"
    for step in ci_tests_job(shared)["steps"]:
        assert "${{" not in step.get("run", ""), step
