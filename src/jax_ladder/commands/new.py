"""`jax-ladder new RUNG`: scaffold a starter project, then print the next steps.

`jax-ladder new RUNG --help` lists that template's options, read from its
cookiecutter.json (options.load_options): nothing here names an option.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import textwrap
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jax_ladder import pythons, versions
from jax_ladder.commands._common import (
    Args,
    Parser,
    Subparsers,
    add_repeatable,
    ask_option,
    rung_or_error,
)
from jax_ladder.options import Option, UsageError, load_options, parse_assignments, resolve
from jax_ladder.rungs import Rung, available, template_dir
from jax_ladder.scaffold import scaffold

HELP = "scaffold a starter project for a rung"


def add_parser(sub: Subparsers) -> None:
    # Help is an ordinary flag, not argparse's action (which prints and exits as
    # soon as it is parsed): `new RUNG --help` must know RUNG to list its options.
    _arguments(
        sub.add_parser(
            "new", help=HELP, add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter
        ),
        None,
    )


def _arguments(parser: argparse.ArgumentParser, rung: Rung | None) -> argparse.ArgumentParser:
    """The `new` parser's arguments; its description and epilog for `rung` (or for
    no rung: the list of rungs, and how to see a template's options)."""
    parser.add_argument(
        "-h", "--help", action="store_true", help="show this help (with RUNG: its options)"
    )
    # Optional to argparse, so that `new --help` works; run() requires it.
    parser.add_argument("rung", nargs="?", help="rung name, see 'jax-ladder list'")
    parser.add_argument("--name", help="project name (the package name is derived from it)")
    parser.add_argument("--output-dir", type=Path, default=Path(), help="where to create it")
    parser.add_argument("--no-input", action="store_true", help="take defaults, ask nothing")
    add_repeatable(
        parser,
        "--set",
        "KEY=VALUE",
        "set a template option (repeatable; 'jax-ladder new RUNG --help' lists them)",
    )
    usage = parser.format_usage().removeprefix("usage: ").strip()
    parser.usage = usage.replace("[rung]", rung.name if rung else "RUNG")
    if rung is None:
        names = ", ".join(r.name for r in available())
        parser.description = "Scaffold a starter project for a rung."
        parser.epilog = _wrap(
            f"RUNG is one of: {names}. Each template has its own options: "
            "'jax-ladder new RUNG --help' lists them, with their choices and defaults."
        )
    else:
        parser.description = _wrap(
            f"Scaffold a starter project for rung {rung.step}, {rung.name} ({rung.summary})."
        )
        parser.epilog = template_options_help(rung)
    return parser


def template_options_help(rung: Rung) -> str:
    """The template's options as `--help` lists them: each with its choices and
    default, from cookiecutter.json; the derived ones (a Jinja default) named last."""
    options = load_options(template_dir(rung))
    shown = [option for option in options.values() if not option.derived]
    lines = [f"options of the {rung.name} template (--set KEY=VALUE, or answer the prompts):"]
    column = 24  # argparse's: where the help column starts
    for option in shown:
        left = f"  {option.key}={_values(option)}"
        right = f"{option.prompt}; default: {_default(option)}"
        if len(left) <= column - 2:
            lines += _wrap(right, left.ljust(column), " " * column).splitlines()
        else:
            lines.append(left)
            lines += _wrap(right, " " * column, " " * column).splitlines()
    derived = [option.key for option in options.values() if option.derived]
    if derived:
        lines += _wrap(
            f"Derived from the options above unless set: {', '.join(derived)}.", "  ", "  "
        ).splitlines()
    return "\n".join(lines)


def _values(option: Option) -> str:
    if option.kind == "choice":
        return "|".join(option.choices)
    return "true|false" if option.kind == "bool" else "TEXT"


def _default(option: Option) -> str:
    if option.kind == "bool":
        return "true" if option.default else "false"
    return str(option.default)


def _wrap(text: str, first: str = "", rest: str = "") -> str:
    width = max(shutil.get_terminal_size().columns - 2, 60)  # as argparse wraps
    return textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest)


def help_text(rung: Rung | None) -> str:
    parser = Parser(
        prog="jax-ladder new", add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return _arguments(parser, rung).format_help()


def run(args: Args) -> int:
    if args.help:
        print(help_text(rung_or_error(args.rung) if args.rung else None), end="")
        return 0
    if args.rung is None:
        raise UsageError("the following arguments are required: rung (see 'jax-ladder new --help')")
    rung = rung_or_error(args.rung)
    options = load_options(template_dir(rung))
    given = parse_assignments(options, args.set)
    if args.name is not None:
        given["project_name"] = args.name
    interactive = not args.no_input and sys.stdin.isatty()
    project = scaffold(rung, args.output_dir, given, prompt=ask_option if interactive else None)
    print(f"Created {project}\n\nNext steps:")
    for step in next_steps(project):
        print(f"  {step}")
    if not interactive and "op_name" in options and "op_name" not in given:
        # The op's name is in its module, functions, tests (and C++ targets): naming it is
        # a new bake, so say it before the user edits anything.
        op = resolve(options, given)["op_name"]
        again = [f"jax-ladder new {rung.name}"]
        again += [f"--name {args.name}"] if args.name is not None else []
        again += [f"--set {k}={v}" for k, v in given.items() if k != "project_name"]
        print(
            f"The op is named {op!r} (the example's name). To give it yours, remove this "
            f"folder and generate it again before editing anything: {' '.join(again)} "
            "--set op_name=NAME"
        )
    print("Then make it your op: README.md's 'Adapt it' table names the files that are yours.")
    note = _installed_jax_note()
    if note:
        print(f"\nNote: {note}")
    return 0


def next_steps(project: Path) -> list[str]:
    """The commands from a fresh project to its tests passing, in a virtual
    environment made with a Python the project's requires-python allows."""
    needs = pythons.requires_python(project)
    steps = [
        f"cd {project}",
        # `jax-ladder update` merges only into committed work.
        "git init && git add -A && git commit -m 'jax-ladder new'",
    ]
    if not pythons.jax_requirement(project).contains(versions.JAX_OLDEST):
        # internals' api=hijax: its JAX has no wheels for the oldest Python,
        # which requires-python (kept alike in every project) still admits.
        needs &= SpecifierSet(f">={versions.HIJAX_PYTHON_OLDEST}")
        steps.append(
            f"# it needs JAX {versions.HIJAX_JAX_OLDEST} or newer "
            f"(jax{pythons.jax_requirement(project)}), so Python "
            f"{versions.HIJAX_PYTHON_OLDEST} or newer: JAX {versions.HIJAX_JAX_OLDEST} has no "
            f"wheels for Python {versions.PYTHON_OLDEST}"
        )
    # A Python that gets the window's newest JAX first (3.11 gets only its oldest
    # minor: pip picks it there without a word), else any the project allows.
    newest = needs & SpecifierSet(f">={versions.HIJAX_PYTHON_OLDEST}")
    python = pythons.find_python(newest) or pythons.find_python(needs)
    if python is None:
        steps.append(f"# it needs Python {needs}, and none was found here: install one, then")
        steps.append(f"# {_jax_by_python(project)}")
        python = f"python{pythons.oldest_allowed(needs)}"
    else:
        version = pythons.version_of(python)
        gets = _jax_on(version, project)
        said = f"# {python} is Python {version}: it gets JAX {gets}"
        if pythons.jax_requirement(project).contains(versions.JAX_OLDEST):
            said += f" ({_jax_by_python(project)})"  # hijax: the line above says why
        steps.append(said)
    steps += [
        f"{python} -m venv .venv && . .venv/bin/activate",
        # The pip that `venv` bundles may be old: pip 23.2 (Python 3.11's and
        # 3.12.1's) resolves every dependency, for minutes, before it reads the
        # project's requires-python, and then fails without naming the Python
        # needed; a current pip refuses a too-old Python at once and says so.
        "python -m pip install --upgrade pip",
        "python -m pip install -e '.[test]'",
        "python -m pytest",
        "python benchmarks/bench.py",
    ]
    return steps


def _jax_on(python_version: str | None, project: Path) -> str:
    """The JAX minor ("0.10.x") pip installs for the project on that Python: the
    window's newer minors have no wheels for its oldest Python."""
    newer = Version(python_version or "0") >= Version(versions.HIJAX_PYTHON_OLDEST)
    if newer or not pythons.jax_requirement(project).contains(versions.JAX_OLDEST):
        return versions.JAX_NEWEST_MINOR
    return versions.JAX_ON_PYTHON_OLDEST


def _jax_by_python(project: Path) -> str:
    """What each Python gets, as the next steps say it."""
    newer = f"{versions.HIJAX_PYTHON_OLDEST} or newer"
    if not pythons.jax_requirement(project).contains(versions.JAX_OLDEST):
        return f"Python {newer} gets JAX {versions.JAX_NEWEST_MINOR}"
    return (
        f"Python {versions.PYTHON_OLDEST} gets JAX {versions.JAX_ON_PYTHON_OLDEST} only, "
        f"{newer} {versions.JAX_NEWEST_MINOR}"
    )


def _installed_jax_note() -> str | None:
    """Where the JAX installed here is outside the window, what to do about it
    (read from the package metadata: importing JAX is slow and may fail)."""
    try:
        installed = importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None
    return versions.outside_window(installed)
