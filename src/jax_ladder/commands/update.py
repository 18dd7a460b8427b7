"""`jax-ladder update`: merge the current template's changes into a generated
project (update.py does the work; adopt.py records a pre-0.2.0 project)."""

from __future__ import annotations

import sys
from pathlib import Path

from jax_ladder import __version__, adopt, changelog
from jax_ladder import update as updating
from jax_ladder.commands._common import (
    Args,
    Subparsers,
    add_repeatable,
    ask_option,
    rung_or_error,
)
from jax_ladder.generation import rebuild_commands
from jax_ladder.options import UsageError, load_options, parse_assignments
from jax_ladder.rungs import template_dir


def add_parser(sub: Subparsers) -> None:
    update = sub.add_parser(
        "update", help="merge the current template's changes into a generated project"
    )
    update.add_argument("project", nargs="?", type=Path, default=Path(), help="default: .")
    mode = update.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="exit 1 if the project is behind the template"
    )
    mode.add_argument("--diff", action="store_true", help="show the template's changes")
    update.add_argument(
        "--no-input", action="store_true", help="new template options take their defaults"
    )
    update.add_argument(
        "--adopt",
        action="store_true",
        help="a project from a release before 0.2.0 (no .jax-ladder/): take its first commit "
        "as the generated state",
    )
    update.add_argument("--base", metavar="COMMIT", help="with --adopt: the generation commit")
    update.add_argument("--rung", help="with --adopt: the project's rung, if not recognised")
    add_repeatable(
        update,
        "--set",
        "KEY=VALUE",
        "with --adopt: an answer the project was generated with (repeatable)",
    )


def run(args: Args) -> int:
    merging = not (args.check or args.diff)
    interactive = merging and not args.no_input and sys.stdin.isatty()
    if not args.adopt and (args.base or args.rung or args.set):
        raise UsageError("--base, --rung and --set go with --adopt")
    if args.adopt:
        _adopt(args)
    renders = updating.load(
        args.project,
        prompt=ask_option if interactive else None,
        require_committed=merging and not args.adopt,
    )
    changes = updating.template_changes(renders)
    if args.check:
        if not changes:
            print(f"{_name(args.project)}: up to date with jax-ladder {__version__}")
            return 0
        listed = ", ".join(changes[:5]) + (", ..." if len(changes) > 5 else "")
        print(
            f"{_name(args.project)}: behind jax-ladder {__version__}'s template: {len(changes)} "
            f"file(s) differ ({listed}); run 'jax-ladder update'"
        )
        return 1
    if args.diff:
        if not changes:
            print(f"{_name(args.project)}: up to date with jax-ladder {__version__}; no diff")
            return 0
        sys.stdout.write(updating.diff(renders))
        return 0
    _print_changelog(renders.generation.kit_version)
    plan = updating.apply(args.project, renders)
    status = _report(args.project, plan)
    if plan.changed:
        rung = rung_or_error(renders.generation.rung)
        for data, command in rebuild_commands(template_dir(rung)).items():
            run = command.format(**renders.answers)
            print(
                f"  REBUILD  {data}: generated data, which update never merges; after an "
                f"update that changed the op or its format, run: {run}"
            )
    return status


def _print_changelog(since: str) -> None:
    """The CHANGELOG.md entries between the project's kit and this one."""
    path = changelog.changelog_path()
    if not path.is_file():
        return
    entries = changelog.entries_between(path.read_text(), since, __version__)
    if entries:
        print(f"What changed since jax-ladder {since} (CHANGELOG.md):\n")
        print("\n\n".join(entries) + "\n")


def _adopt(args: Args) -> None:
    """Record an earlier release's project's state (adopt.py), then update as usual."""
    if not args.project.is_dir():
        raise UsageError(f"{str(args.project)!r} is not a directory")
    updating.refuse_uncommitted_work(args.project)
    rung = rung_or_error(args.rung) if args.rung else None
    given = {}
    if args.set:
        chosen = rung or adopt.infer_rung(adopt.files_at(args.project, "HEAD"))
        given = parse_assignments(load_options(template_dir(chosen)), args.set)
    _, notes = adopt.adopt(args.project.resolve(), args.base, given, rung)
    for note in notes:
        print(f"  {note}")


def _name(project: Path) -> str:
    return project.resolve().name


def _report(project: Path, plan: updating.Plan) -> int:
    for label, names in (
        ("updated", plan.updated),
        ("added", plan.added),
        ("removed", plan.removed),
        ("merged", plan.merged),
        ("CONFLICT", plan.conflicts),
    ):
        for name in names:
            print(f"  {label:<8} {name}")
    for line in plan.attention:
        print(f"  ATTENTION {line}")
    if not plan.changed and not plan.attention:
        print(f"{_name(project)}: already up to date with jax-ladder {__version__}")
        return 0
    if plan.conflicts or plan.attention:
        print(
            "Resolve the conflict markers and ATTENTION items above, run the tests, then commit "
            "(git diff shows every change)."
        )
        return 1
    print("Run the tests, review 'git diff', then commit.")
    return 0
