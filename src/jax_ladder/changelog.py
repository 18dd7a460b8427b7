"""CHANGELOG.md, read: what each release changed, for `jax-ladder update`
to print the entries between a project's kit version and this kit's."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

# "## 0.2.0 (2026-12-02)": a release's heading.
HEADING = re.compile(r"^## (\S+)(?: \(([^)]*)\))?\s*$", re.MULTILINE)


def changelog_path() -> Path:
    """Inside the installed package, else the source tree's."""
    installed = Path(__file__).parent / "CHANGELOG.md"
    return (
        installed if installed.is_file() else Path(__file__).resolve().parents[2] / "CHANGELOG.md"
    )


def releases(text: str) -> dict[Version, str]:
    """Each release's version -> its entry (heading included), newest first."""
    matches = list(HEADING.finditer(text))
    found = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        try:
            version = Version(match.group(1))
        except InvalidVersion:
            continue
        end = following.start() if following else len(text)
        found[version] = text[match.start() : end].strip()
    return found


def entries_between(text: str, since: str, until: str) -> list[str]:
    """The entries of releases after `since`, up to and including `until`."""
    low, high = Version(since), Version(until)
    return [entry for version, entry in releases(text).items() if low < version <= high]
