"""`jax-ladder update --adopt`: take in a project made by a kit release that
did not yet record `.jax-ladder/` (0.1.0), so that `update` can merge into it.

Such a project still holds its generated state in its own git history: the
commit it was generated in, its first (as `new`'s next steps have users make
it). That commit's files become the merge base. The answers are read from the
project where a file states them (its names, the copyright line) and the rest
are inferred: for each option in turn, the value whose render of the current
template is closest to the base, the others held (`--set` overrides any).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tempfile
import tomllib
from pathlib import Path

from jax_ladder.generation import (
    IGNORED_PARTS,
    STATE_DIR,
    Files,
    Generation,
    project_files,
    record,
    update_skip,
)
from jax_ladder.options import Option, UsageError, load_options, resolve
from jax_ladder.rungs import Rung, available, template_dir
from jax_ladder.scaffold import render

# The release whose projects carry no .jax-ladder/ state.
ADOPTED_FROM = "0.1.0"
COPYRIGHT = re.compile(r"^Copyright \(c\) (\d{4}) (.+)$", re.MULTILINE)


def git(project: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)
    if result.returncode != 0:
        raise UsageError(
            f"git {' '.join(args)} failed in {project.name!r}: {result.stderr.strip()}"
        )
    return result.stdout


def first_commit(project: Path) -> str:
    roots = git(project, "rev-list", "--max-parents=0", "HEAD").split()
    if len(roots) != 1:
        raise UsageError(
            f"{project.name!r} has {len(roots)} root commits; name the one it was generated "
            "in with --base COMMIT"
        )
    return roots[0]


def files_at(project: Path, commit: str, skip: tuple[str, ...] = ()) -> Files:
    """The project's files as committed in `commit` (paths relative to the project)."""
    listing = git(project, "ls-tree", "-r", "-z", commit, "--", ".")
    files: Files = {}
    for line in filter(None, listing.split("\0")):
        meta, name = line.split("\t", 1)
        mode, kind, blob = meta.split()
        skipped = any(fnmatch.fnmatchcase(name, pattern) for pattern in skip)
        if kind != "blob" or mode == "120000" or skipped:
            continue
        if IGNORED_PARTS.intersection(Path(name).parts):
            continue
        data = subprocess.run(
            ["git", "cat-file", "blob", blob], cwd=project, capture_output=True, check=True
        ).stdout
        files[name] = (data, mode == "100755")
    return files


def infer_rung(files: Files) -> Rung:
    """The rung whose template, rendered with the project's names, has the
    most of the project's file names (a template's files are what tells one
    rung from another; their lines moved on since), the closest lines on a tie."""

    def fit(rung: Rung) -> tuple[int, int]:
        rendered = _render(rung, files, {})
        return -len(files.keys() & rendered.keys()), distance(rendered, files)

    fits = sorted((fit(rung), rung.name) for rung in available())
    (best, name), (second, _) = fits[0], fits[1]
    if best == second:
        raise UsageError(
            "cannot tell which template this project came from; name it with --rung NAME"
        )
    return next(rung for rung in available() if rung.name == name)


def stated_answers(files: Files, options: dict[str, Option], template: Path) -> dict[str, object]:
    """The answers the project's own files state. (An earlier release always
    generated the worked example, under its own name: `example`'s default.)"""
    answers: dict[str, object] = {}
    if "example" in options and options["example"].choices:
        answers["example"] = options["example"].choices[0]
    pyproject = files.get("pyproject.toml")
    if pyproject:
        project = tomllib.loads(pyproject[0].decode())["project"]
        answers["project_name"] = project["name"]
        if "Source" in project.get("urls", {}):
            answers["url"] = project["urls"]["Source"]
        licences = options["license"].choices if "license" in options else ()
        if project.get("license") in licences:
            answers["license"] = project["license"]
    # The accelerator workflow, if any, is one of the template's files verbatim.
    workflow = files.get(".github/workflows/accelerator.yml")
    if workflow is None:
        answers["accelerator_ci"] = "none"
    for kind in template.glob("*/_accelerator_ci/*.yml"):
        if workflow and kind.read_bytes() == workflow[0]:
            answers["accelerator_ci"] = kind.stem
    packages = {n.split("/")[1] for n in files if re.fullmatch(r"src/[^/]+/__init__\.py", n)}
    if len(packages) == 1:
        answers["package_name"] = packages.pop()
    licence = files.get("LICENSE")
    match = COPYRIGHT.search(licence[0].decode(errors="replace")) if licence else None
    if match:
        answers["copyright_year"], answers["copyright_holder"] = match.groups()
    return {key: value for key, value in answers.items() if key in options}


def _lines(files: Files) -> set[tuple[str, bytes]]:
    return {(name, line) for name, (data, _) in files.items() for line in data.splitlines()}


def distance(render: Files, base: Files) -> int:
    """Lines (with their file) in one and not the other, in the files the base
    has: a file the project never had tells nothing about its answers."""
    shared = {name: entry for name, entry in render.items() if name in base}
    return len(_lines(shared) ^ _lines(base))


def infer_answers(
    rung: Rung, base: Files, given: dict[str, object]
) -> tuple[dict[str, object], list[str]]:
    """The answers whose render of the current template is closest to base,
    and a note per inferred choice."""
    template = template_dir(rung)
    options = load_options(template)
    answers = {**stated_answers(base, options, template), **given}
    skip = update_skip(template)
    notes = []

    def rendered(trial: dict[str, object]) -> Files:
        with tempfile.TemporaryDirectory(prefix="jax-ladder-adopt-") as tmp:
            project = render(rung, template, resolve(options, trial), Path(tmp))
            return project_files(project, skip)

    for key, option in options.items():
        if key in answers or not option.choices or len(option.choices) < 2:
            continue
        fits = {
            value: distance(rendered({**answers, key: value}), base) for value in option.choices
        }
        answers[key] = min(option.choices, key=lambda value: fits[value])
        notes.append(f"{key}={answers[key]} (inferred; --set {key}=VALUE to choose)")
    return answers, notes


def _render(rung: Rung, base: Files, answers: dict[str, object]) -> Files:
    """The current template's files for these answers (the rest stated by
    base, or defaults)."""
    template = template_dir(rung)
    options = load_options(template)
    trial = {**stated_answers(base, options, template), **answers}
    with tempfile.TemporaryDirectory(prefix="jax-ladder-adopt-") as tmp:
        project = render(rung, template, resolve(options, trial), Path(tmp))
        return project_files(project, update_skip(template))


def adopt(
    project: Path, base_commit: str | None, given: dict[str, object], rung: Rung | None = None
) -> tuple[Generation, list[str]]:
    """Record the project's generated state from its history; the notes say
    what was inferred. Refuses a project that already has its state."""
    if (project / STATE_DIR).exists():
        raise UsageError(f"{project.name!r} already has {STATE_DIR}/; run 'jax-ladder update'")
    commit = base_commit or first_commit(project)
    everything = files_at(project, commit)
    if not everything:
        raise UsageError(f"{project.name!r} has no files in commit {commit[:12]}")
    rung = rung or infer_rung(everything)
    skip = update_skip(template_dir(rung))
    base = {n: e for n, e in everything.items() if not any(fnmatch.fnmatchcase(n, p) for p in skip)}
    answers, notes = infer_answers(rung, base, given)
    context = resolve(load_options(template_dir(rung)), answers)
    generation = Generation(rung.name, dict(context), ADOPTED_FROM)
    record(project, generation, base)
    notes.insert(0, f"adopted as {rung.name}, generated in commit {commit[:12]}")
    return generation, notes
