"""The kit's own workflows (CI, the full tier and release, Pages for the site):
pinned actions, no persisted credentials, least permissions, and the same
command as .ci/run (the quick tier) or scripts/test --full.
(Checked by hand with `check-jsonschema --builtin-schema vendor.github-workflows`
and `zizmor --offline`.)"""

import re

import pytest
from conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW = (WORKFLOWS / "ci.yml").read_text()
PAGES = (WORKFLOWS / "pages.yml").read_text()
RELEASE = (WORKFLOWS / "release.yml").read_text()
NEXT = (WORKFLOWS / "jax-next.yml").read_text()
EVERY = {"ci": WORKFLOW, "pages": PAGES, "release": RELEASE, "jax-next": NEXT}


@pytest.mark.parametrize("workflow", EVERY.values(), ids=EVERY.keys())
def test_every_action_is_pinned_to_a_commit_with_its_version_named(workflow):
    uses = re.findall(r"uses:\s*(\S+)(.*)", workflow)
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert re.search(r"#\s*v\d", comment), f"{action}: name the version in a comment"


@pytest.mark.parametrize("workflow", EVERY.values(), ids=EVERY.keys())
def test_least_privilege_and_no_persisted_credentials(workflow):
    assert re.search(r"^permissions: \{\}$", workflow, re.MULTILINE)
    checkouts = workflow.count("actions/checkout@")
    assert workflow.count("persist-credentials: false") == checkouts
    assert "workflow_dispatch" in workflow


def test_the_scheduled_and_release_workflows_run_the_full_tier_on_the_whole_history():
    """The selection rule (tests/tiers.py) reads the history: a shallow clone
    would run every battery in the quick tier."""
    assert "scripts/test --full" in RELEASE
    assert "schedule:" in RELEASE
    assert "pytest --full" in NEXT
    for workflow in (WORKFLOW, RELEASE, NEXT):
        assert "fetch-depth: 0" in workflow
    full_tier, rest = RELEASE.split("\n  build:\n")
    assert "write" not in full_tier + rest.split("\n  publish:\n")[0]
    assert "needs: [full-tier, build]" in rest


def test_a_newer_run_cancels_an_older_one_except_a_deployment():
    for workflow in (WORKFLOW, RELEASE, NEXT):
        assert "cancel-in-progress: true" in workflow
    assert "cancel-in-progress: false" in PAGES


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


def test_the_full_tier_has_the_oldest_python_and_must_use_it():
    # tests/test_oldest_python.py skips without Python PYTHON_OLDEST, unless
    # told it may not: the full tier, which alone runs it (the release path,
    # tests/tiers.py), installs it and says so.
    from jax_ladder.versions import PYTHON_OLDEST

    full_tier = RELEASE.split("\n  build:\n")[0]
    assert re.search(rf"python-version: \|\n\s+{re.escape(PYTHON_OLDEST)}\n", full_tier)
    assert 'JAX_LADDER_NEED_OLDEST_PYTHON: "1"' in full_tier
