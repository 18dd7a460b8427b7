"""The kit's two test tiers, and the one rule that picks what the quick one runs.

    ./scripts/test           the quick tier: the README's test command, which .ci/run calls
    ./scripts/test --full    the full tier: the scheduled and the release workflows

Both tiers run every test module of the kit. Per template, the quick tier runs
every option combination baked, lint-clean, free of Jinja, every file in its
adapt table, and its tests collected; the default combination type-checked and
its own suite run, the conformance matrix included. A template's *battery* is
the rest: every covering combination's own suite, every mutant, the
oldest-JAX pass, the default project on the oldest Python (tests/test_oldest_python.py),
every combination type-checked, the second op, adopt, the
wheels and the FFI's native checks. In every battery the conformance
matrix runs whole in the default combination, the first skeleton and the
oldest-JAX pass, and its quick selection (one cell of each family) in every
other covering combination. The full tier runs every battery; the quick tier
runs the battery of each template that is *selected*: a file under
templates/<rung>/ (or a file one of its links points to) changed since the
last release, the commit that set the current `__version__` (CI's clone has
the history but no tags; uncommitted and untracked files count as changes).

CI protects main, so the quick tier runs every battery a change can break:
a change to shared machinery (SHARED_MACHINERY below: what every project
shares, and the kit's generation and test machinery) selects every
template's battery, and a submission whose newest commit is a release runs
the full tier, so no release lands untested. The budget
is half of CI's 90 minutes on two cores, whatever is selected.

A test joins a battery with the marker `battery(<rung>)`; tests/conftest.py
deselects the batteries this rule leaves out and prints the rule's choice at
the start of the run.

The release path's checks (marker `release_path`: every template's wheels
built, installed and tested on the window's oldest and newest JAX, the
release steps as written, the default projects on the oldest Python, the
examples' tests on the oldest JAX) run in the full tier only, whatever
changed: they test how a release is made and installed and the window's
oldest end, which the scheduled and release workflows run, and they took
over a third of a quick run that selected every battery (1,500 of the two
workers' 4,000 s; the examples' oldest-JAX pass about 300 more).
`Selection.runs` is the one place that decides.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

VERSION_FILE = "src/jax_ladder/__init__.py"
VERSION_LINE = "^__version__ = "  # git log -G: the commits that moved the version

# The kit's code that generates every project or checks every battery: a
# change here can break any template's projects, so it selects every battery.
SHARED_MACHINERY = (
    "src/jax_ladder/scaffold.py",
    "src/jax_ladder/generation.py",
    "src/jax_ladder/options.py",
    "src/jax_ladder/runner.py",
    "src/jax_ladder/rungs.py",
    "src/jax_ladder/versions.py",
    "templates/name_rules.py",
    "tests/conftest.py",
    "tests/mutation.py",
    "tests/forked_pytest.py",
    "tests/test_templates.py",
    "tests/tiers.py",
    # What every project shares, and what writes it into each (fnmatch patterns).
    "src/jax_ladder/opcheck/*",
    "src/jax_ladder/project_files/*",
    "templates/shared_files.py",
    "templates/pre_gen_project.py",  # every template's hooks/ links to it
)


@dataclass(frozen=True)
class Selection:
    """Which templates' batteries run, and why."""

    tier: str  # "quick" or "full"
    since: str  # what the changes were compared with
    reasons: dict[str, str]  # template -> why its battery runs
    shared: tuple[str, ...] = ()  # shared machinery changed (it selects every battery)

    def battery(self, template: str) -> bool:
        return template in self.reasons

    def runs(self, batteries: tuple[str, ...] | None, release_path: bool) -> bool:
        """Whether a test runs: `batteries`, the templates whose battery it is
        part of (None: no battery; empty: any template's); `release_path`,
        whether it is one of the release path's checks (full tier only)."""
        if release_path and self.tier != "full":
            return False
        if batteries is None:
            return True
        if batteries:
            return any(self.battery(name) for name in batteries)
        return bool(self.reasons)

    def describe(self, templates: list[str]) -> list[str]:
        """The lines printed at the start of a run."""
        lines = [f"jax-ladder tests: {self.tier} tier; changes compared with {self.since}"]
        for name in templates:
            why = self.reasons.get(name, "unchanged: default combination only")
            runs = "full battery" if name in self.reasons else "quick"
            lines.append(f"  {name:<20} {runs:<13} {why}")
        if self.shared:
            shown = ", ".join(self.shared[:3]) + ", ..." * (len(self.shared) > 3)
            lines.append(f"  shared machinery changed ({shown}): every battery runs")
        if self.tier == "quick":
            lines.append(
                "  (./scripts/test --full runs every template's battery and the release path's"
                " checks)"
            )
        return lines


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def release_commits(root: Path) -> list[str]:
    """The commits that set the current version and the one before it, newest
    first; none without history (a shallow clone's first commit would seem to
    set it)."""
    shallow = _git(root, "rev-parse", "--is-shallow-repository").stdout.strip()
    if shallow != "false":
        return []
    found = _git(root, "log", "-2", "--format=%H", "-G", VERSION_LINE, "--", VERSION_FILE)
    return found.stdout.split() if found.returncode == 0 else []


def release_commit(root: Path) -> str | None:
    """The commit that set the current version, or None without history."""
    commits = release_commits(root)
    return commits[0] if commits else None


def changed_since(root: Path, commit: str) -> list[str]:
    """Files changed since commit: committed, uncommitted and untracked."""
    diff = _git(root, "diff", "--name-only", commit).stdout.split()
    untracked = _git(root, "ls-files", "--others", "--exclude-standard").stdout.split()
    return sorted({*diff, *untracked})


def shared_machinery(path: str) -> bool:
    """Whether path is part of what every template's projects depend on."""
    return any(fnmatchcase(path, pattern) for pattern in SHARED_MACHINERY)


def linked_files(root: Path, template: str) -> set[str]:
    """The files outside templates/<template>/ that its symbolic links point to
    (memory-and-sharding's hlo.py is custom-partitioning's): a change there is
    a change of this template too, though git shows it under the other."""
    folder = root / "templates" / template
    links = (p for p in folder.rglob("*") if p.is_symlink())
    return {p.resolve().relative_to(root.resolve()).as_posix() for p in links}


def release_at_head(root: Path, commit: str) -> bool:
    """Whether commit (the one that set the current version) is HEAD, with
    nothing uncommitted: the submission ends with its release."""
    head = _git(root, "rev-parse", "HEAD").stdout.strip()
    dirty = _git(root, "status", "--porcelain", "--untracked-files=normal").stdout.strip()
    return head == commit and not dirty


def select(root: Path, templates: list[str], full: bool) -> Selection:
    """The rule. `templates`: every template's folder name."""
    if full:
        return Selection("full", "nothing (--full)", dict.fromkeys(templates, "--full"))
    commits = release_commits(root)
    if not commits:
        why = "no git history to compare with: every battery runs"
        return Selection("quick", "nothing (no history)", dict.fromkeys(templates, why))
    version = _git(root, "show", "-s", "--format=%h", commits[0]).stdout.strip()
    if release_at_head(root, commits[0]):
        why = f"the newest commit, {version}, is a release: the full tier"
        return Selection("full", f"a release at HEAD ({version})", dict.fromkeys(templates, why))
    changed = changed_since(root, commits[0])
    shared = tuple(p for p in changed if shared_machinery(p))
    reasons = {}
    for name in templates:
        # (Every template's hook links to the one pre-generation hook: shared.)
        linked = {p for p in linked_files(root, name) if not shared_machinery(p)}
        own = [p for p in changed if p.startswith(f"templates/{name}/") or p in linked]
        if own:
            shown = ", ".join(p.removeprefix(f"templates/{name}/") for p in own[:3])
            reasons[name] = f"changed: {shown}" + ", ..." * (len(own) > 3)
        elif shared:
            shown = ", ".join(shared[:2]) + ", ..." * (len(shared) > 2)
            reasons[name] = f"shared machinery changed: {shown}"
    return Selection("quick", f"the last release's commit {version}", reasons, shared)
