"""`jax-ladder demo`: scaffold every rung's defaults and run their quick tests."""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jax_ladder.commands._common import Args, Subparsers, add_repeatable, rung_or_error
from jax_ladder.commands.new import next_steps
from jax_ladder.rungs import Rung, available
from jax_ladder.runner import TestRun, needs_build, run_project_tests
from jax_ladder.scaffold import scaffold

# The demo is a first look, not a test run: each project's quick selection,
# the marker every generated project's tests/conftest.py defines.
DEMO_SELECTION = ("-m", "quick")


def add_parser(sub: Subparsers) -> None:
    demo = sub.add_parser(
        "demo", help="scaffold every rung with defaults and run its quick tests (a first look)"
    )
    demo.add_argument(
        "--output-dir", type=Path, help="where to scaffold (default: a fresh temporary directory)"
    )
    demo.add_argument("-v", "--verbose", action="store_true", help="show the tests' output")
    add_repeatable(
        demo, "--rung", "NAME", "only this rung (repeatable; default: every rung with a template)"
    )


def run(args: Args) -> int:
    # Ladder order (available()'s), each rung once, whatever order --rung named them in.
    chosen = {rung_or_error(name).name for name in args.rung}
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
    print_table(rows)
    print(f"{len(rungs)} rung(s) in {time.perf_counter() - start:.0f} s", flush=True)
    first = projects[rungs[0].name]
    print(
        f"Each ran its quick selection (pytest {' '.join(DEMO_SELECTION)}: the reference "
        "against its float64 oracle, then one conformance cell of each family an "
        "adaptation breaks). A project's whole suite (the conformance matrix and "
        f"its own tests, minutes), {first.name}'s for one, in a virtual environment of "
        "its own:",
        flush=True,
    )
    for step in next_steps(first):
        if "bench.py" not in step:
            print(f"  {step}", flush=True)
    return 0 if all(run.ok for _, run, _ in rows) else 1


def print_table(rows: list[tuple[Rung, TestRun, float]]) -> None:
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
