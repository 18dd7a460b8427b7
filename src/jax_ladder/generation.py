"""What a generated project carries so that `jax-ladder update` can merge later
template changes into it: `.jax-ladder/answers.json` (the rung, the answers,
the kit version) and `.jax-ladder/base.tar.gz` (every file exactly as the kit
generated it: the merge base). The project carries its own base because a kit
installed from a wheel has no template history to re-render old versions from.
"""

from __future__ import annotations

import fnmatch
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

STATE_DIR = ".jax-ladder"
ANSWERS_FILE = f"{STATE_DIR}/answers.json"
BASE_FILE = f"{STATE_DIR}/base.tar.gz"
FORMAT = 1
# Never part of a project's generated files: the state itself, and what
# running or building the project leaves behind.
IGNORED_PARTS = frozenset({STATE_DIR, ".git", "__pycache__", "build", ".nox", ".venv"})


class StateError(Exception):
    """The project's .jax-ladder state is missing or unreadable."""


@dataclass(frozen=True)
class Generation:
    rung: str
    answers: dict[str, object]
    kit_version: str


# A generated file: its bytes and whether it is executable.
Files: TypeAlias = dict[str, tuple[bytes, bool]]


def update_skip(template: Path) -> tuple[str, ...]:
    """Globs (cookiecutter.json's `_update_skip`) of files a template's hooks
    generate as the project's own data, such as the export rung's golden
    artifact: written once, never merged by an update."""
    raw = json.loads((template / "cookiecutter.json").read_text())
    return tuple(raw.get("_update_skip", ()))


def rebuild_commands(template: Path) -> dict[str, str]:
    """cookiecutter.json's `_rebuild`: for each glob of `_update_skip`, the
    command that regenerates that data ({package_name} filled in), which
    `update` names since it never merges the data itself."""
    raw = json.loads((template / "cookiecutter.json").read_text())
    return dict(raw.get("_rebuild", {}))


def project_files(root: Path, skip: tuple[str, ...] = ()) -> Files:
    """Every file under root that belongs to the project as generated."""
    files: Files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        name = relative.as_posix()
        if IGNORED_PARTS.intersection(relative.parts):
            continue
        entry = read_entry(path)
        if entry and not any(fnmatch.fnmatchcase(name, pattern) for pattern in skip):
            files[name] = entry
    return files


def read_entry(path: Path) -> tuple[bytes, bool] | None:
    """A file's bytes and whether it is executable; None if it is not a file."""
    if not path.is_file():
        return None
    return path.read_bytes(), bool(path.stat().st_mode & 0o100)


def record(project: Path, generation: Generation, files: Files) -> None:
    """Write the answers and the merge base into the project."""
    state = project / STATE_DIR
    state.mkdir(exist_ok=True)
    answers = {
        "format": FORMAT,
        "rung": generation.rung,
        "kit_version": generation.kit_version,
        "answers": generation.answers,
    }
    (project / ANSWERS_FILE).write_text(json.dumps(answers, indent=2, sort_keys=True) + "\n")
    buffer = io.BytesIO()
    # mtime 0 and sorted names: the same files always give the same archive,
    # so an update that changes nothing leaves no diff behind.
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        for name, (data, executable) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o755 if executable else 0o644
            tar.addfile(info, io.BytesIO(data))
    (project / BASE_FILE).write_bytes(_deterministic_gzip(buffer.getvalue()))


def _deterministic_gzip(data: bytes) -> bytes:
    # gzip stores a timestamp in bytes 4..8 of its header: zero it.
    return data[:4] + b"\0\0\0\0" + data[8:]


def read_generation(project: Path) -> Generation:
    path = project / ANSWERS_FILE
    if not path.is_file():
        name = project.resolve().name
        raise StateError(
            f"{name!r} has no {ANSWERS_FILE}: if an earlier jax-ladder (0.1.0) made it, run "
            f"'jax-ladder update --adopt {project}' (its first commit is taken as generated; "
            "--base COMMIT names another); a project made with cruft updates with 'cruft update'"
        )
    try:
        raw = json.loads(path.read_text())
        if raw["format"] != FORMAT:
            raise ValueError(f"format {raw['format']!r}, this kit reads {FORMAT}")
        generation = Generation(str(raw["rung"]), dict(raw["answers"]), str(raw["kit_version"]))
    except (ValueError, KeyError, TypeError) as err:
        raise StateError(f"{ANSWERS_FILE} is corrupted ({err}); restore it from git") from err
    return generation


def read_base(project: Path) -> Files:
    try:
        with tarfile.open(project / BASE_FILE, mode="r:gz") as tar:
            files: Files = {}
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is None:
                    raise ValueError(f"{member.name} is not a regular file")
                files[member.name] = (extracted.read(), bool(member.mode & 0o100))
            return files
    except (OSError, tarfile.TarError, ValueError, EOFError) as err:
        problem = f"{BASE_FILE} is missing or corrupted ({err}); restore it from git"
        raise StateError(problem) from err
