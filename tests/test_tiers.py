"""The quick tier's selection rule (tests/tiers.py), tried on temporary clones
of the kit: a release, then one change, then which batteries the rule picks."""

import subprocess

import pytest
import tiers
from conftest import REPO

from jax_ladder.rungs import available

TEMPLATES = [rung.name for rung in available()]
GIT = ["git", "-c", "user.name=kit", "-c", "user.email=kit@example.org"]


def git(cwd, *args):
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True)


def set_version(clone, version):
    init = clone / tiers.VERSION_FILE
    text = init.read_text()
    init.write_text(text.replace("__version__ = ", f"__version__ = {version!r} or ", 1))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A clone of this checkout whose newest commit is a release (it sets a new
    __version__)."""
    clone = tmp_path_factory.mktemp("tiers") / "kit"
    git(REPO, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    set_version(clone, "99.0")
    git(clone, "commit", "-qam", "release 99.0")
    return clone


@pytest.fixture
def kit(released):
    release = git(released, "rev-parse", "HEAD").stdout.strip()
    yield released
    git(released, "reset", "-q", "--hard", release)
    git(released, "clean", "-qfd")


def select(kit, full=False):
    return tiers.select(kit, TEMPLATES, full)


def append(path, line="# a change\n"):
    path.write_text(path.read_text() + line)


def test_a_release_at_head_runs_the_full_tier(kit):
    # The submission that ends with its release commit: no release lands untested.
    chosen = select(kit)
    assert chosen.tier == "full"
    assert sorted(chosen.reasons) == sorted(TEMPLATES)
    assert "a release at HEAD" in chosen.describe(TEMPLATES)[0]
    assert chosen.runs(("pallas",), release_path=True)


def test_a_commit_after_the_release_that_changes_nothing_selects_no_battery(kit):
    git(kit, "commit", "-q", "--allow-empty", "-m", "nothing")
    chosen = select(kit)
    assert chosen.reasons == {}
    assert chosen.tier == "quick"
    assert "the last release's commit" in chosen.describe(TEMPLATES)[0]


def test_a_changed_template_file_selects_that_template_only(kit):
    append(kit / "templates" / "pallas" / "mutations.toml")
    chosen = select(kit)
    assert list(chosen.reasons) == ["pallas"]
    assert "mutations.toml" in chosen.reasons["pallas"]
    assert chosen.battery("pallas")
    assert not chosen.battery("ffi")
    lines = chosen.describe(TEMPLATES)
    assert any(line.split()[:2] == ["pallas", "full"] for line in lines), lines
    assert any(line.split()[:2] == ["ffi", "quick"] for line in lines), lines


def test_a_file_another_template_links_to_selects_both(kit):
    # A template may keep a file as a link to another template's (one copy):
    # a change to it is a change of both.
    (kit / "templates" / "export" / "linked.toml").symlink_to("../ffi/mutations.toml")
    git(kit, "add", "-A")
    set_version(kit, "100.0")
    git(kit, "commit", "-qam", "release 100.0, with the link")
    append(kit / "templates" / "ffi" / "mutations.toml")
    assert sorted(select(kit).reasons) == ["export", "ffi"]


def test_a_committed_change_counts_as_well_as_a_new_file(kit):
    append(kit / "templates" / "export" / "cookiecutter.json", "")
    (kit / "templates" / "internals" / "new_file.txt").write_text("new\n")
    assert list(select(kit).reasons) == ["internals"]
    git(kit, "add", "-A")
    git(kit, "commit", "-qm", "a change after the release")
    assert list(select(kit).reasons) == ["internals"]


@pytest.mark.parametrize(
    "shared",
    [
        "src/jax_ladder/opcheck/conformance/__init__.py",
        "src/jax_ladder/project_files/noxfile.py",
        "templates/shared_files.py",
        "templates/pre_gen_project.py",
        "tests/mutation.py",
        "src/jax_ladder/scaffold.py",
    ],
)
def test_shared_machinery_selects_every_battery_and_is_named(kit, shared):
    # What every project shares (the conformance matrix lives once in the
    # package) and the kit's machinery: a change can break any template's
    # projects, so every battery runs, and the run's first lines say why.
    append(kit / shared)
    chosen = select(kit)
    assert chosen.tier == "quick"
    assert sorted(chosen.reasons) == sorted(TEMPLATES)
    assert all(shared in why for why in chosen.reasons.values())
    assert chosen.shared == (shared,)
    lines = chosen.describe(TEMPLATES)
    assert any(shared in line and "every battery" in line for line in lines)
    assert all(line.split()[1] == "full" for line in lines[1 : 1 + len(TEMPLATES)]), lines


def release_changing(kit, path):
    """A release commit that also changes path (a template fix released with it)."""
    append(kit / path)
    set_version(kit, "100.0")
    git(kit, "commit", "-qam", "release 100.0")


def test_a_release_that_changed_a_template_runs_the_full_tier(kit):
    release_changing(kit, "templates/pallas/mutations.toml")
    assert select(kit).tier == "full"


def test_a_change_after_the_release_is_compared_with_the_release(kit):
    release_changing(kit, "templates/pallas/mutations.toml")
    append(kit / "templates" / "ffi" / "mutations.toml")
    chosen = select(kit)
    assert chosen.tier == "quick"
    assert list(chosen.reasons) == ["ffi"]


def test_other_kit_files_select_no_battery(kit):
    append(kit / "README.md", "\nA note.\n")
    append(kit / "src" / "jax_ladder" / "doctor.py")
    assert select(kit).reasons == {}


def test_the_full_tier_selects_every_template(kit):
    chosen = select(kit, full=True)
    assert chosen.tier == "full"
    assert sorted(chosen.reasons) == sorted(TEMPLATES)


def test_a_clone_without_history_runs_every_battery(tmp_path, released):
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{released}", str(shallow))
    chosen = select(shallow)
    assert sorted(chosen.reasons) == sorted(TEMPLATES)
    assert "no git history" in chosen.reasons["ffi"]


def test_every_shared_machinery_pattern_names_files():
    assert [pattern for pattern in tiers.SHARED_MACHINERY if not any(REPO.glob(pattern))] == []


@pytest.mark.parametrize("tier", ["quick", "full"])
def test_the_release_path_runs_in_the_full_tier_only(tier):
    every = dict.fromkeys(TEMPLATES, "changed")
    chosen = tiers.Selection(tier, "a commit", every)
    assert chosen.runs(None, release_path=False)
    assert chosen.runs(("pallas",), release_path=False)
    assert chosen.runs(("pallas",), release_path=True) == (tier == "full")
    assert chosen.runs(None, release_path=True) == (tier == "full")


def test_a_battery_runs_where_its_template_is_selected():
    chosen = tiers.Selection("quick", "a commit", {"pallas": "changed"})
    assert chosen.runs(("pallas",), release_path=False)
    assert not chosen.runs(("ffi",), release_path=False)
    assert chosen.runs((), release_path=False)  # any template's battery
    assert not tiers.Selection("quick", "a commit", {}).runs((), release_path=False)
