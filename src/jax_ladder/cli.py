"""The `jax-ladder` command: list, new, demo, update, recommend, doctor, locate."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

from jax_ladder import (
    __version__,
    adopt,
    changelog,
    doctor,
    doctor_project,
    locate,
    pythons,
    versions,
)
from jax_ladder import recommend as rec
from jax_ladder import update as updating
from jax_ladder.generation import rebuild_commands
from jax_ladder.options import Option, UsageError, load_options, parse_assignments, parse_value
from jax_ladder.rungs import LADDER, Rung, available, by_name, docs_dir, template_dir
from jax_ladder.runner import TestRun, needs_build, run_project_tests
from jax_ladder.scaffold import GenerationError, scaffold
from jax_ladder.versions import JAX_SPEC

type Args = argparse.Namespace
type Subparsers = argparse._SubParsersAction[_Parser]


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line with a hint, exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jax-ladder", description="Starters for each rung of JAX's escalation ladder.")
    p.add_argument("--version", action="version", version=f"jax-ladder {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add_parser, _ in COMMANDS.values():
        add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        _, handler = COMMANDS[args.command]
        return handler(args)
    except UsageError as err:
        print(f"jax-ladder: error: {err}", file=sys.stderr)
        return 2
    except GenerationError as err:
        print(f"jax-ladder: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("jax-ladder: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `jax-ladder list | head`
        sys.stderr.close()
        return 0


# Each command: the function that adds its parser, beside its handler.


def _add_list(sub: Subparsers) -> None:
    sub.add_parser("list", help="show the nine rungs and how to scaffold each")


def cmd_list(args: Args) -> int:
    print("The JAX escalation ladder (climb only as far as you must):\n")
    for r in LADDER:
        mark = "*" if r.template else " "
        how = f"jax-ladder new {r.name}" if r.template else f"no template: {r.instead}"
        print(f"{mark} {r.step}. {r.name:<20} {r.summary}")
        print(f"     {how}")
    print("\n* = the kit has a template for this rung")
    return 0


def _rung_or_error(name: str) -> Rung:
    rung = by_name(name)
    names = ", ".join(r.name for r in available())
    if rung is None:
        raise UsageError(f"unknown rung {name!r}; choose one of: {names}")
    if not rung.template:
        raise UsageError(
            f"the kit has no template for {name!r} yet ({rung.instead}); "
            f"templates exist for: {names}"
        )
    return rung


def _prompt[T](prompt: str, default: T, parse: Callable[[str], T], no_answer: str) -> T:
    """Ask until parse(text) accepts the answer; Enter keeps the default.

    parse raises UsageError for a bad answer, which is shown before asking
    again; with nothing left on standard input, UsageError(no_answer).
    """
    while True:
        try:
            text = input(prompt).strip()
        except EOFError:
            raise UsageError(no_answer) from None
        if not text:
            return default
        try:
            return parse(text)
        except UsageError as err:
            print(f"  {err}")


def _ask(option: Option, default: object) -> object:
    hint = f" [{'/'.join(option.choices)}]" if option.choices else ""
    return _prompt(
        f"{option.prompt}{hint} ({default}): ",
        default,
        lambda text: parse_value(option, text),
        "no answer on standard input; pass --no-input to take defaults",
    )


def _add_new(sub: Subparsers) -> None:
    new = sub.add_parser("new", help="scaffold a starter project for a rung")
    new.add_argument("rung", help="rung name, see 'jax-ladder list'")
    new.add_argument("--name", help="project name (the package name is derived from it)")
    new.add_argument("--output-dir", type=Path, default=Path(), help="where to create it")
    new.add_argument("--no-input", action="store_true", help="take defaults, ask nothing")
    new.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a template option (repeatable)",
    )


def cmd_new(args: Args) -> int:
    rung = _rung_or_error(args.rung)
    options = load_options(template_dir(rung))
    given = parse_assignments(options, args.set)
    if args.name is not None:
        given["project_name"] = args.name
    interactive = not args.no_input and sys.stdin.isatty()
    project = scaffold(rung, args.output_dir, given, prompt=_ask if interactive else None)
    print(f"Created {project}\n\nNext steps:")
    print(f"  cd {project}")
    # `jax-ladder update` merges only into committed work.
    print("  git init && git add -A && git commit -m 'jax-ladder new'")
    needs = pythons.requires_python(project)
    python = pythons.find_python(needs)
    if python is None:
        print(f"  # it needs Python {needs}, and none was found here: install one, then")
        python = f"python{pythons.oldest_allowed(needs)}"
    print(f"  {python} -m venv .venv && . .venv/bin/activate")
    print("  python -m pip install -e '.[test]'")
    print("  python -m pytest")
    print("  python benchmarks/bench.py")
    print("Then make it your op: README.md's 'Adapt it' table names the files that are yours.")
    note = _installed_jax_note()
    if note:
        print(f"\nNote: {note}")
    return 0


def _installed_jax_note() -> str | None:
    """Where the JAX installed here is outside the window, what to do about it
    (read from the package metadata: importing JAX is slow and may fail)."""
    try:
        installed = importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None
    return versions.outside_window(installed)


def _add_update(sub: Subparsers) -> None:
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
    update.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --adopt: an answer the project was generated with (repeatable)",
    )


def cmd_update(args: Args) -> int:
    merging = not (args.check or args.diff)
    interactive = merging and not args.no_input and sys.stdin.isatty()
    if not args.adopt and (args.base or args.rung or args.set):
        raise UsageError("--base, --rung and --set go with --adopt")
    if args.adopt:
        _adopt(args)
    renders = updating.load(
        args.project,
        prompt=_ask if interactive else None,
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
    status = _report_update(args.project, plan)
    if plan.changed:
        rung = _rung_or_error(renders.generation.rung)
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
    rung = _rung_or_error(args.rung) if args.rung else None
    given = {}
    if args.set:
        chosen = rung or adopt.infer_rung(adopt.files_at(args.project, "HEAD"))
        given = parse_assignments(load_options(template_dir(chosen)), args.set)
    _, notes = adopt.adopt(args.project.resolve(), args.base, given, rung)
    for note in notes:
        print(f"  {note}")


def _name(project: Path) -> str:
    return project.resolve().name


def _report_update(project: Path, plan: updating.Plan) -> int:
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


def _add_demo(sub: Subparsers) -> None:
    demo = sub.add_parser(
        "demo", help="scaffold every rung with defaults and run its quick tests (a first look)"
    )
    demo.add_argument(
        "--output-dir", type=Path, help="where to scaffold (default: a fresh temporary directory)"
    )
    demo.add_argument("-v", "--verbose", action="store_true", help="show the tests' output")
    demo.add_argument(
        "--rung",
        action="append",
        default=[],
        metavar="NAME",
        help="only this rung (repeatable; default: every rung with a template)",
    )


# The demo is a first look, not a test run: each project's quick selection,
# the marker every generated project's tests/conftest.py defines.
DEMO_SELECTION = ("-m", "quick")


def cmd_demo(args: Args) -> int:
    # Ladder order (available()'s), each rung once, whatever order --rung named them in.
    chosen = {_rung_or_error(name).name for name in args.rung}
    rungs = [rung for rung in available() if rung.name in chosen] if chosen else available()
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="jax-ladder-demo-"))
    workers = min(len(rungs), os.cpu_count() or 1)
    print(f"jax-ladder demo: {len(rungs)} rung(s) in {out}, {workers} at a time", flush=True)
    start = time.perf_counter()
    projects = {}
    for rung in rungs:
        print(f"{rung.name}: scaffolding", flush=True)
        projects[rung.name] = scaffold(rung, out / rung.name, {})

    def test(rung: Rung) -> tuple[TestRun, float]:
        project = projects[rung.name]
        doing = "building and testing" if needs_build(project) else "running tests in"
        print(f"{rung.name}: {doing} {project}", flush=True)
        began = time.perf_counter()
        echo = (lambda line: print(f"  {rung.name}: {line}", flush=True)) if args.verbose else None
        run = run_project_tests(project, echo=echo, extra_args=DEMO_SELECTION)
        seconds = time.perf_counter() - began
        print(f"{rung.name}: {'ok' if run.ok else 'FAILED'} in {seconds:.1f} s", flush=True)
        if not run.ok and not args.verbose:
            print(run.output[-4000:], flush=True)
        return run, seconds

    # The projects' test runs are separate processes, mostly one core each, so
    # they run side by side; the compiled ones (the longest) start first. The
    # table keeps ladder order, not the order the runs finish in.
    order = sorted(rungs, key=lambda rung: not needs_build(projects[rung.name]))
    with ThreadPoolExecutor(workers) as pool:
        results = dict(zip((r.name for r in order), pool.map(test, order), strict=True))
    rows = [(rung, *results[rung.name]) for rung in rungs]
    _print_table(rows)
    print(f"{len(rungs)} rung(s) in {time.perf_counter() - start:.0f} s", flush=True)
    print(
        f"Each ran its quick selection (pytest {' '.join(DEMO_SELECTION)}: the reference "
        "against its float64 oracle, the op against the reference eagerly, jitted, under "
        "vmap and differentiated). A project's whole suite (the conformance matrix and "
        f"its own tests, minutes): cd {projects[rungs[0].name]}, then "
        "python -m pip install -e '.[test]' && python -m pytest",
        flush=True,
    )
    return 0 if all(run.ok for _, run, _ in rows) else 1


def _print_table(rows: list[tuple[Rung, TestRun, float]]) -> None:
    header = (
        f"{'rung':<20} {'result':<7} {'passed':>6} {'failed':>6} "
        f"{'worst oracle error':>26} {'seconds':>8}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for rung, run, seconds in rows:
        if run.worst_error is None:
            err = "not reported"
        else:
            err = f"{run.worst_error:.2e} ({run.worst_fraction:.0f}% of tol)"
        result = "ok" if run.ok else "FAILED"
        print(
            f"{rung.name:<20} {result:<7} {run.passed:>6} {run.failed:>6} {err:>26} {seconds:>8.1f}"
        )


def _ask_question(question: rec.Question) -> str:
    if question.hint:
        print(f"  ({question.hint})")
    return _prompt(
        f"{question.text} [{'/'.join(question.choices)}] ({question.default}): ",
        question.default,
        lambda text: rec.parse_answer(question, text),
        f"no answer to {question.key!r} on standard input; pass --answer "
        f"{question.key}=VALUE, --answers FILE, or --no-input to take defaults",
    )


def _add_recommend(sub: Subparsers) -> None:
    rcmd = sub.add_parser(
        "recommend",
        help="ask the questions that decide the rung and recommend the lowest that fits",
        description="Recommend the lowest rung that fits. Asks each question not answered "
        "by --answer or --answers; --no-input takes the defaults instead. "
        "Questions: " + ", ".join(f"{q.key} ({'/'.join(q.choices)})" for q in rec.QUESTIONS),
    )
    rcmd.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="answer one question (repeatable); see --list-questions",
    )
    rcmd.add_argument(
        "--answers", type=Path, metavar="FILE", help="answers from a JSON or TOML file"
    )
    rcmd.add_argument(
        "--no-input", action="store_true", help="ask nothing; unanswered questions take defaults"
    )
    rcmd.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    rcmd.add_argument(
        "--list-questions", action="store_true", help="print the questions and the allowed answers"
    )


def cmd_recommend(args: Args) -> int:
    if args.list_questions:
        for q in rec.QUESTIONS:
            when = "; asked when " + ", ".join(
                f"{k} is {' or '.join(v)}" for k, v in q.only_if.items()
            )
            print(f"{q.key}: {q.text}")
            print(f"    {' | '.join(q.choices)} (default {q.default}){when if q.only_if else ''}")
        return 0
    given = rec.load_answers_file(args.answers) if args.answers else {}
    given.update(rec.parse_answer_flags(args.answer))
    asked = []

    def ask(question: rec.Question) -> str:
        asked.append(question.key)
        return _ask_question(question)

    answers = rec.resolve_answers(given, ask=None if args.no_input else ask)
    result = rec.recommend(answers)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(("\n" if asked else "") + rec.render(result, page_root=_page_root()))
    return 0


def _page_root() -> Path | None:
    """The folder holding docs/rungs/: the installed package, else the source checkout."""
    try:
        return docs_dir().parent
    except FileNotFoundError:
        return None


def _add_doctor(sub: Subparsers) -> None:
    doc = sub.add_parser(
        "doctor",
        help="versions, backends, tools, what each rung can do here, known problems",
        description="Exit status 1 only where the kit itself cannot work.",
    )
    doc.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_doctor(args: Args) -> int:
    report = doctor.assess(doctor.gather())
    # Run inside a generated project, the doctor also reports on it.
    root = doctor_project.find_project(Path.cwd())
    project = (
        None
        if root is None
        else doctor_project.assess_project(root, report.facts.packages.get("jax"))
    )
    if args.json:
        data = doctor.to_json(report)
        if project is not None:
            data["project"] = project if isinstance(project, str) else project.to_json()
        print(json.dumps(data, indent=2))
    else:
        text = doctor.render(report)
        if root is not None and project is not None:
            text += "\n\n" + "\n".join(doctor_project.render_project(project, root))
        print(text)
    return 0 if report.ok else 1


def _add_locate(sub: Subparsers) -> None:
    loc = sub.add_parser(
        "locate",
        help="find where a JAX concept lives in the installed JAX (for rung 9)",
        description="Ranked places where QUERY lives: modules, definitions, primitives, "
        "public names, then text. Exit status 0 with matches, 1 with none.",
    )
    loc.add_argument("query", nargs="+", help="a name or words, e.g. shard_map or 'while loop'")
    loc.add_argument("--repo", type=Path, help="a JAX checkout: also search its docs/ and tests/")
    loc.add_argument(
        "-n", "--limit", type=int, default=10, help="how many matches to print (default 10)"
    )


def cmd_locate(args: Args) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    query = locate.Query.parse(" ".join(args.query))
    roots = locate.installed_roots()
    if not roots:
        raise UsageError(f"jax is not installed here; pip install 'jax{JAX_SPEC}'")
    if args.repo is not None:
        roots += locate.repo_roots(args.repo)
    hits = locate.locate(query, roots)
    if not hits:
        where = "; ".join(root.label for root in roots)
        print(f"no match for {query.text!r} in {where}; try fewer or other words")
        return 1
    print(locate.render(query, roots, hits, args.limit))
    return 0


# The commands, in the order `jax-ladder --help` lists them.
COMMANDS: dict[str, tuple[Callable[[Subparsers], None], Callable[[Args], int]]] = {
    "list": (_add_list, cmd_list),
    "new": (_add_new, cmd_new),
    "demo": (_add_demo, cmd_demo),
    "update": (_add_update, cmd_update),
    "recommend": (_add_recommend, cmd_recommend),
    "doctor": (_add_doctor, cmd_doctor),
    "locate": (_add_locate, cmd_locate),
}
