"""The kit's version means something: it moves with every change to a
template, CHANGELOG.md says what each release changed, and the installed
kit reports the version its source states (one home: __init__.py)."""

import runpy
import subprocess
from importlib.metadata import version

import pytest
import tiers
from conftest import REPO
from packaging.version import Version

from jax_ladder import __version__, changelog

INIT = tiers.VERSION_FILE
SHARED_FILES = runpy.run_path(str(REPO / "templates" / "shared_files.py"))


def git(*args):
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


def test_the_installed_kit_has_the_version_its_source_states():
    assert version("jax-ladder") == __version__


def test_the_changelogs_newest_release_is_this_version():
    releases = changelog.releases((REPO / "CHANGELOG.md").read_text())
    assert releases, "CHANGELOG.md has no '## VERSION (DATE)' heading"
    assert list(releases) == sorted(releases, reverse=True), "newest release first"
    assert next(iter(releases)) == Version(__version__)


def test_no_template_changed_since_the_version_last_moved():
    """A project records the kit version that made it, and `update` tells
    what changed since: two different templates must never share a version."""
    moved = tiers.release_commit(REPO)  # the quick tier's "last release" too
    if not moved:
        pytest.skip("this clone of the kit has no history to compare the templates with")
    # What makes a project: the templates, and the files every project shares.
    shared = [f"src/jax_ladder/opcheck/{name}" for name in SHARED_FILES["ENGINE"]]
    made_of = ["templates/", "src/jax_ladder/project_files/", *shared]
    changed = git("diff", "--name-only", moved, "--", *made_of).stdout.split()
    assert changed == [], (
        f"templates changed since {__version__} ({moved[:12]}): bump __version__ in {INIT} "
        f"and add its CHANGELOG.md entry; changed: {changed[:10]}"
    )


def test_update_prints_the_entries_between_two_versions():
    text = (REPO / "CHANGELOG.md").read_text()
    entries = changelog.entries_between(text, "0.1.0", __version__)
    assert entries
    assert entries[0].startswith(f"## {__version__} ")
    assert changelog.entries_between(text, __version__, __version__) == []
