"""`jax-ladder update`: bring a generated project to the current template,
keeping its owner's edits.

Three versions of every file meet: the base (as the kit generated it, carried
by the project in .jax-ladder/base.tar.gz), the new render (the current
template with the project's saved answers) and the owner's copy. A file the
template did not change is left alone; one the owner did not change takes the
template's new version (or goes, if the template dropped it); one both changed
is merged three-way by `git merge-file`, which leaves standard conflict
markers where both touched the same lines.
"""

from __future__ import annotations

import difflib
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from packaging.version import Version

from jax_ladder import __version__
from jax_ladder.generation import (
    Files,
    Generation,
    StateError,
    project_files,
    read_base,
    read_entry,
    read_generation,
    record,
    update_skip,
)
from jax_ladder.options import Option, UsageError, load_options, resolve
from jax_ladder.rungs import by_name, template_dir
from jax_ladder.scaffold import Prompt, render


@dataclass
class Plan:
    """What an update does, file by file (paths relative to the project)."""

    updated: list[str] = field(default_factory=list)  # owner's copy was the base
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)  # both changed, merged cleanly
    conflicts: list[str] = field(default_factory=list)  # conflict markers left
    attention: list[str] = field(default_factory=list)  # "path: why", not changed

    @property
    def changed(self) -> list[str]:
        return self.updated + self.added + self.removed + self.merged + self.conflicts


@dataclass(frozen=True)
class Renders:
    generation: Generation
    base: Files
    new: Files
    answers: dict[str, object]


def load_state(project: Path) -> tuple[Generation, Files]:
    """The project's saved answers and base, or a UsageError saying why not."""
    if not project.is_dir():
        raise UsageError(f"{str(project)!r} is not a directory")
    try:
        generation = read_generation(project)
        base = read_base(project)
    except StateError as err:
        raise UsageError(str(err)) from err
    if Version(generation.kit_version) > Version(__version__):
        raise UsageError(
            f"the project was made by jax-ladder {generation.kit_version}, newer than this "
            f"one ({__version__}); upgrade jax-ladder first"
        )
    return generation, base


def load(
    project: Path,
    prompt: Prompt | None = None,
    template: Path | None = None,
    require_committed: bool = False,
) -> Renders:
    """Read the project's state and render the current template with its
    answers. Raises UsageError (the refusals, uncommitted work among them
    when require_committed) before anything is written or rendered."""
    generation, base = load_state(project)
    if require_committed:
        refuse_uncommitted_work(project)
    rung = by_name(generation.rung)
    if rung is None or rung.template is None:
        raise UsageError(f"{generation.rung!r} in the answers is not a rung with a template")
    template = template or template_dir(rung)
    options = load_options(template)
    answers = _answers_for(options, generation.answers, prompt)
    context = resolve(options, answers)
    with tempfile.TemporaryDirectory(prefix="jax-ladder-update-") as tmp:
        new = project_files(render(rung, template, context, Path(tmp)), update_skip(template))
    return Renders(generation, base, new, dict(context))


def _answers_for(
    options: dict[str, Option], saved: dict[str, object], prompt: Prompt | None
) -> dict[str, object]:
    """The saved answers the template still has; a new option is asked for
    (or takes its default)."""
    answers = {key: value for key, value in saved.items() if key in options}
    for key, option in options.items():
        if key not in answers and not option.derived and prompt is not None:
            answers[key] = prompt(option, option.default)
    return answers


def template_changes(renders: Renders) -> list[str]:
    """The files the current template renders differently from the base."""
    names = renders.base.keys() | renders.new.keys()
    return sorted(n for n in names if renders.base.get(n) != renders.new.get(n))


def diff(renders: Renders) -> str:
    """The template's changes since the project was generated, as a unified diff."""
    chunks = []
    for name in template_changes(renders):
        old, new = renders.base.get(name), renders.new.get(name)
        if _is_binary(old) or _is_binary(new):
            chunks.append(f"Binary file {name} differs\n")
            continue
        chunks.extend(
            difflib.unified_diff(_text_lines(old), _text_lines(new), f"a/{name}", f"b/{name}", n=3)
        )
    return "".join(chunks)


def refuse_uncommitted_work(project: Path) -> None:
    """Updating rewrites files: only do it where git can show and undo it."""
    # Untracked files count as uncommitted work: the update may write to a
    # path the owner created, or add one beside it.
    result = subprocess.run(
        ["git", "status", "--porcelain", "."],
        cwd=project,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise UsageError(
            f"{str(project)!r} is not in a git repository; commit the project to git first, "
            "so the update's changes can be reviewed and undone"
        )
    if result.stdout.strip():
        raise UsageError(
            f"{str(project)!r} has uncommitted changes or untracked files; commit or stash "
            "them first (update never overwrites uncommitted work)"
        )


def apply(project: Path, renders: Renders) -> Plan:
    """Merge the template's changes into the project and record the new base."""
    plan = Plan()
    for name in template_changes(renders):
        _merge_file(project, name, renders.base.get(name), renders.new.get(name), plan)
    generation = Generation(renders.generation.rung, renders.answers, __version__)
    record(project, generation, renders.new)
    return plan


Entry: TypeAlias = tuple[bytes, bool] | None


def _merge_file(project: Path, name: str, base: Entry, new: Entry, plan: Plan) -> None:
    path = project / name
    ours = read_entry(path)
    if ours == new:
        return
    if ours == base:
        _write(path, new)
        (plan.removed if new is None else plan.added if base is None else plan.updated).append(name)
    elif new is None:
        plan.attention.append(
            f"{name}: the template dropped this file; you changed it, so it stays"
        )
    elif ours is None:
        plan.attention.append(f"{name}: you removed it and the template changed it; not restored")
    elif any(_is_binary(entry) for entry in (ours, new, base)):
        _write(path.with_name(path.name + ".template"), new)
        plan.attention.append(
            f"{name}: binary, changed by you and the template; see {name}.template"
        )
    else:
        clean = _merge_text(path, base[0] if base else b"", new[0])
        (plan.merged if clean else plan.conflicts).append(name)


def _merge_text(path: Path, base: bytes, new: bytes) -> bool:
    """git merge-file into path; True when no conflict markers were left."""
    with tempfile.TemporaryDirectory() as tmp:
        base_file, new_file = Path(tmp, "base"), Path(tmp, "new")
        base_file.write_bytes(base)
        new_file.write_bytes(new)
        labels = ["-L", "yours", "-L", "template as generated", "-L", "template now"]
        result = subprocess.run(
            ["git", "merge-file", *labels, str(path), str(base_file), str(new_file)],
            capture_output=True,
        )
    if result.returncode < 0 or result.returncode > 127:
        raise RuntimeError(f"git merge-file failed on {path}: {result.stderr.decode()}")
    return result.returncode == 0


def _write(path: Path, entry: Entry) -> None:
    if entry is None:
        path.unlink()
        return
    data, executable = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def _is_binary(entry: Entry) -> bool:
    return entry is not None and b"\0" in entry[0][:8192]


def _text_lines(entry: Entry) -> list[str]:
    return [] if entry is None else entry[0].decode(errors="replace").splitlines(keepends=True)
