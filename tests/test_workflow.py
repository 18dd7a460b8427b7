"""The kit's own workflows (CI, and Pages for the site): pinned actions, no
persisted credentials, least permissions, and the same command as .ci/run.
(Checked by hand with `check-jsonschema --builtin-schema vendor.github-workflows`
and `zizmor --offline`.)"""

import re

import pytest
from conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW = (WORKFLOWS / "ci.yml").read_text()
PAGES = (WORKFLOWS / "pages.yml").read_text()


@pytest.mark.parametrize("workflow", [WORKFLOW, PAGES], ids=["ci", "pages"])
def test_every_action_is_pinned_to_a_commit_with_its_version_named(workflow):
    uses = re.findall(r"uses:\s*(\S+)(.*)", workflow)
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert re.search(r"#\s*v\d", comment), f"{action}: name the version in a comment"


def test_least_privilege_and_no_persisted_credentials():
    assert re.search(r"^permissions: \{\}$", WORKFLOW, re.MULTILINE)
    assert "persist-credentials: false" in WORKFLOW
    assert "cancel-in-progress: true" in WORKFLOW
    assert "workflow_dispatch" in WORKFLOW


def test_ci_runs_what_ci_run_runs():
    assert "bash .ci/run" in WORKFLOW
    assert "scripts/test" in (REPO / ".ci" / "run").read_text()


def test_pages_builds_with_nox_and_only_its_deploy_job_may_write():
    assert re.search(r"^permissions: \{\}$", PAGES, re.MULTILINE)
    assert "persist-credentials: false" in PAGES
    assert "nox -s docs" in PAGES
    build, deploy = PAGES.split("\n  deploy:\n")
    assert "write" not in build
    assert "pages: write" in deploy
    assert "id-token: write" in deploy
