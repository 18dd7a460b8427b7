"""The kit's own CI workflow: pinned actions, no persisted credentials, least
permissions, and the same command as .ci/run. (Checked by hand with
`check-jsonschema --builtin-schema vendor.github-workflows` and `zizmor --offline`.)"""

import re

from conftest import REPO

WORKFLOW = (REPO / ".github" / "workflows" / "ci.yml").read_text()


def test_every_action_is_pinned_to_a_commit_with_its_version_named():
    uses = re.findall(r"uses:\s*(\S+)(.*)", WORKFLOW)
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
