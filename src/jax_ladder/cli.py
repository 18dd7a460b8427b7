"""The `jax-ladder` command: list, new, demo."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from jax_ladder import __version__
from jax_ladder.options import Option, UsageError, load_options, parse_assignments, parse_value
from jax_ladder.rungs import LADDER, Rung, available, by_name, template_dir
from jax_ladder.runner import run_project_tests
from jax_ladder.scaffold import GenerationError, scaffold


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line with a hint, exit status 2."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jax-ladder", description="Starters for each rung of JAX's escalation ladder.")
    p.add_argument("--version", action="version", version=f"jax-ladder {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="show the nine rungs and how to scaffold each")

    new = sub.add_parser("new", help="scaffold a starter project for a rung")
    new.add_argument("rung", help="rung name, see 'jax-ladder list'")
    new.add_argument("--name", help="project name (the package name is derived from it)")
    new.add_argument("--output-dir", type=Path, default=Path("."), help="where to create it")
    new.add_argument("--no-input", action="store_true", help="take defaults, ask nothing")
    new.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a template option (repeatable)",
    )

    demo = sub.add_parser("demo", help="scaffold every rung with defaults and run its tests")
    demo.add_argument(
        "--output-dir", type=Path, help="where to scaffold (default: a fresh temporary directory)"
    )
    demo.add_argument("-v", "--verbose", action="store_true", help="show the tests' output")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return {"list": cmd_list, "new": cmd_new, "demo": cmd_demo}[args.command](args)
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


def cmd_list(args) -> int:
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


def _ask(option: Option, default: object) -> object:
    """Prompt until the answer is valid; Enter keeps the default."""
    hint = f" [{'/'.join(option.choices)}]" if option.choices else ""
    while True:
        try:
            text = input(f"{option.prompt}{hint} ({default}): ").strip()
        except EOFError:
            raise UsageError(
                "no answer on standard input; pass --no-input to take defaults"
            ) from None
        if not text:
            return default
        try:
            return parse_value(option, text)
        except UsageError as err:
            print(f"  {err}")


def cmd_new(args) -> int:
    rung = _rung_or_error(args.rung)
    options = load_options(template_dir(rung))
    given = parse_assignments(options, args.set)
    if args.name is not None:
        given["project_name"] = args.name
    interactive = not args.no_input and sys.stdin.isatty()
    project = scaffold(rung, args.output_dir, given, prompt=_ask if interactive else None)
    print(f"Created {project}\n\nNext steps:")
    print(f"  cd {project}")
    print("  python -m pip install -e '.[test]'")
    print("  python -m pytest")
    print("  python benchmarks/bench.py")
    return 0


def cmd_demo(args) -> int:
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="jax-ladder-demo-"))
    rungs = available()
    print(f"jax-ladder demo: {len(rungs)} rung(s) in {out}", flush=True)
    rows = []
    for i, rung in enumerate(rungs, 1):
        print(f"[{i}/{len(rungs)}] {rung.name}: scaffolding", flush=True)
        start = time.perf_counter()
        project = scaffold(rung, out / rung.name, {})
        print(f"[{i}/{len(rungs)}] {rung.name}: running tests in {project}", flush=True)
        echo = (lambda line: print("    " + line, flush=True)) if args.verbose else None
        run = run_project_tests(project, echo=echo)
        if not run.ok and not args.verbose:
            print(run.output[-4000:])
        rows.append((rung, run, time.perf_counter() - start))
    _print_table(rows)
    return 0 if all(run.ok for _, run, _ in rows) else 1


def _print_table(rows) -> None:
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
