"""`jax-ladder opcheck DECLARATION`: an op's conformance matrix
(jax_ladder.opcheck.check), from the command line.

DECLARATION is a declaration file (every OpSpec at its top level, found as
the pytest plugin finds them: plugin.specs_in), FILE.py::NAME (that one), or
MODULE:ATTR with --signature, an importable function that has no
declaration: its reference is the op itself, and its oracle the op run in
float64 on the CPU (a self-consistency check, which the report says).

Prints, per op, its counts, its failures grouped by likely cause (the
report's failure_groups) with the command that reruns each, and the time;
--json and --junit write the reports as data. Exit status 0 where no cell
failed, 1 where one did, 2 for a usage or declaration error (one line).

JAX is imported when the command runs, not with the CLI: first the plugin's
8 simulated CPU devices are set (the sharding cells need 4), where nothing
chose a count.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_ladder.commands._common import Args, Subparsers
from jax_ladder.options import UsageError

if TYPE_CHECKING:
    from jax_ladder.opcheck.conformance import OpSpec
    from jax_ladder.opcheck.report import Report

SELF_ORACLE = "the op itself in float64 — a self-consistency check, not an independent oracle"
# --signature's defaults, where no declaration gives them: each named axis a
# distinct multiple of 4 (a mesh of 4 splits it; distinct sizes catch a
# transposed axis), in the order the signature names them.
DEFAULT_SIZES = (8, 12, 16, 20, 24, 28, 32)
# In ulps of float32: at each value, and at the output's largest value for
# sums whose terms cancel (compare.py).
DEFAULT_TOLERANCE = (4.0, 4.0)
DEFAULT_GRADIENT_TOLERANCE = (8.0, 8.0)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "opcheck",
        help="run an op's conformance matrix (jax_ladder.opcheck) and report each cell",
        description="Run the conformance matrix of each op DECLARATION declares: FILE.py "
        "(every OpSpec at its top level), FILE.py::NAME (that one), or MODULE:ATTR with "
        "--signature (an importable function, checked against itself in float64). "
        "Exit status 0 where no cell failed, 1 where one did, 2 for a usage or "
        "declaration error.",
    )
    p.add_argument(
        "declaration",
        metavar="DECLARATION",
        help="FILE.py, FILE.py::NAME, or MODULE:ATTR (with --signature)",
    )
    p.add_argument(
        "--signature",
        metavar="SIG",
        help="for MODULE:ATTR: its arguments' and outputs' named axes, \"x[b,n], w[n] -> [b,n]\"",
    )
    p.add_argument(
        "--sizes",
        metavar="AXIS=N,...",
        help="with --signature: the axes' sizes (default: 8, 12, 16, ... in the order named)",
    )
    p.add_argument(
        "--cells",
        metavar="GLOBS",
        help='the cells to run, comma-separated names or globs ("eager,jit,grad-*"); default all',
    )
    p.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seeds each cell's inputs (default 0)"
    )
    p.add_argument("--json", metavar="PATH", help="write the reports as JSON to PATH (- : stdout)")
    p.add_argument("--junit", metavar="PATH", help="write the reports as JUnit XML to PATH")
    p.add_argument("--list", action="store_true", help="print the cells' names; run nothing")
    p.add_argument(
        "--tracebacks",
        action="store_true",
        help="print the whole traceback of each failed cell's error after its op's summary",
    )
    p.add_argument(
        "--shrink",
        action="store_true",
        help="run the first failed cell of each likely cause again on smaller declarations "
        "(jax_ladder.opcheck.shrink): the smallest sizes and values it still fails at, and a "
        "standalone script that reproduces it, in --repro-dir",
    )
    p.add_argument(
        "--repro-dir",
        default="opcheck-repro",
        metavar="DIR",
        help="where --shrink writes its repro scripts (default opcheck-repro)",
    )


@dataclass
class Target:
    """One op to check: its declaration, how to name it again on the
    command line (`again`: DECLARATION and its options), and the oracle's
    caveat where there is one."""

    spec: OpSpec
    again: list[str]
    oracle: str = ""
    notes: list[str] = field(default_factory=list)
    # The failed cells the reference fails too (_reference_fails), once run.
    reference_fails: dict[str, str] = field(default_factory=dict)
    # --shrink's lines for the cells it shrank (shrink.shrink_lines).
    shrunk: dict[str, list[str]] = field(default_factory=dict)

    def rerun(self, cells: list[str], seed: int) -> str:
        words = ["jax-ladder", "opcheck", *self.again, "--cells", ",".join(cells)]
        return shlex.join([*words, "--seed", str(seed)])


def run(args: Args) -> int:
    if args.json and args.junit and args.json == args.junit and args.json != "-":
        raise UsageError("--json and --junit name the same file")
    is_module = _is_module_target(args.declaration)
    if args.signature is None and is_module:
        raise UsageError(
            f"{args.declaration}: a MODULE:ATTR needs --signature (its axes), e.g. "
            '--signature "x[b,n], w[n] -> [b,n]"'
        )
    if args.signature is not None and not is_module:
        raise UsageError("--signature is for a MODULE:ATTR, not a declaration file")
    if args.sizes is not None and args.signature is None:
        raise UsageError("--sizes is for --signature (a declaration file sets its own sizes)")
    patterns = [p.strip() for p in args.cells.split(",") if p.strip()] if args.cells else None
    if args.cells is not None and not patterns:
        raise UsageError("--cells names no cell")

    from jax_ladder.opcheck.plugin import simulate_cpu_devices

    simulate_cpu_devices()  # before JAX starts: the declaration's import starts it
    targets = _signature_target(args) if is_module else _file_targets(args.declaration)

    from jax_ladder.opcheck.report import check, select_cells

    if args.list:
        for target in targets:
            if len(targets) > 1:
                print(f"{target.spec.name}:")
            for cell in _selected(select_cells, target.spec, patterns):
                print(f"  {cell}" if len(targets) > 1 else cell)
        return 0

    out = sys.stderr if args.json == "-" else sys.stdout
    reports: list[Report] = []
    ran: list[str] = []  # the cells this process ran, for a failure that needs them
    try:
        for target in targets:
            cells = _selected(select_cells, target.spec, patterns)
            print(f"{target.spec.name}: running {len(cells)} cells (seed {args.seed})", file=out)
            for note in target.notes:
                print(f"  {note}", file=out, flush=True)
            try:
                report = check(target.spec, cells=cells, seed=args.seed)
            except ValueError as error:  # a declared refusal that names no cell
                raise UsageError(_one_line(str(error))) from None
            reports.append(report)
            ran += [f"{target.spec.name}[{cell}]" for cell in cells] if len(targets) > 1 else cells
            target.reference_fails = _reference_fails(target, report, args.seed)
            print("\n".join(_text(target, report, args.seed)), file=out, flush=True)
            if args.tracebacks:
                print("\n".join(_tracebacks(report)), file=out, flush=True)
            if args.shrink:
                _shrink(target, report, args.seed, args.repro_dir, out, ran)
    finally:
        # Whatever stopped the run, the reports of the ops that ran are written.
        _write_reports(args, targets, reports)
    total = sum(r.seconds for r in reports)
    failed = sum(len(r.failed) for r in reports)
    count = sum(len(r) for r in reports)
    verdict = f"{failed} failed" if failed else "none failed"
    print(f"{len(reports)} op(s), {count} cells: {verdict}; {total:.1f} s", file=out)
    return 1 if failed else 0


def _write_reports(args: Args, targets: list[Target], reports: list[Report]) -> None:
    """--json and --junit, for the reports made (none: nothing to write)."""
    from jax_ladder.opcheck.report import junit_xml

    if not reports:
        return
    if args.json:
        data = _json(targets, reports, args.seed)
        text = json.dumps(data, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            _write(args.json, text, "--json")
    if args.junit:
        _write(args.junit, junit_xml(reports), "--junit")


def _tracebacks(report: Report) -> list[str]:
    """--tracebacks: each failed cell's whole traceback, as it was raised."""
    lines = []
    for result in report.failed:
        shown = result.traceback.rstrip() or "(no traceback: the cell failed without raising)"
        lines += [f"  traceback of {result.cell}:", *(f"    {x}" for x in shown.splitlines())]
    return lines


def _shrink(
    target: Target, report: Report, seed: int, directory: str, out: Any, ran: list[str]
) -> None:
    """--shrink: the first failed cell of each group, shrunk (shrink.py). A
    shrink that raises is a note in the report (shrink_lines), not its end."""
    from jax_ladder.opcheck.shrink import shrink_lines

    for group in report.failure_groups():
        cell = group.first.cell
        print(f"  shrinking {cell}…", file=out, flush=True)
        lines = shrink_lines(target.spec, cell, seed, directory, ran)
        target.shrunk[cell] = lines
        print("\n".join(f"    {line}" for line in lines), file=out, flush=True)


def _selected(select_cells: Any, spec: OpSpec, patterns: list[str] | None) -> list[str]:
    try:
        cells: list[str] = select_cells(spec, patterns)
    except ValueError as error:  # a pattern that names no cell
        raise UsageError(_one_line(str(error))) from None
    return cells


def _text(target: Target, report: Report, seed: int) -> list[str]:
    """The op's summary: its counts and time, the oracle's caveat, each skip's
    reason once, and its failures grouped by likely cause, each group with
    the commands that rerun it."""
    from jax_ladder.opcheck.report import format_failures

    lines = [f"{report.name}: {len(report)} cells: {report.counts()} ({report.seconds:.1f} s)"]
    if target.oracle:
        lines.append(f"  oracle: {target.oracle}")
    for why in dict.fromkeys(r.line for r in report.skipped):
        skipped = [r.cell for r in report.skipped if r.line == why]
        lines.append(f"  {len(skipped)} skipped ({', '.join(skipped[:4])}…): {why}")
    groups = report.failure_groups()
    if groups:
        lines.append(f"  failed, by likely cause ({len(groups)}):")
        lines += format_failures(
            groups,
            lambda cells: target.rerun(cells, seed),
            indent="    ",
            reference_fails=target.reference_fails,
        )
    return lines


def _reference_fails(target: Target, report: Report, seed: int) -> dict[str, str]:
    """The first failed cell of each group that the plain-JAX reference
    fails too, on the same inputs, with the reference's failure (one run of
    the cell per group: report.reference_also_fails)."""
    from jax_ladder.opcheck.report import reference_also_fails

    found = {}
    for group in report.failure_groups():
        line = reference_also_fails(target.spec, group.first.cell, seed)
        if line is not None:
            found[group.first.cell] = line
    return found


def _json(targets: list[Target], reports: list[Report], seed: int) -> dict[str, Any]:
    ops = []
    for target, report in zip(targets, reports, strict=True):
        data = report.to_dict()
        data["declaration"] = shlex.join(target.again)
        data["oracle"] = target.oracle or "declared"
        for cell in data["cells"]:
            if cell["outcome"] == "failed":
                cell["rerun"] = target.rerun([cell["cell"]], seed)
            if cell["cell"] in target.reference_fails:
                cell["reference_fails_too"] = target.reference_fails[cell["cell"]]
            if cell["cell"] in target.shrunk:
                cell["shrunk"] = target.shrunk[cell["cell"]]
        ops.append(data)
    totals = {"ops": len(reports), "cells": sum(len(r) for r in reports)}
    for outcome in ("passed", "refused", "failed", "skipped"):
        totals[outcome] = sum(op["totals"][outcome] for op in ops)
    return {
        "ok": all(r.ok for r in reports),
        "seed": seed,
        "seconds": round(sum(r.seconds for r in reports), 6),
        "totals": totals,
        "ops": ops,
    }


def _write(path: str, text: str, option: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as error:
        raise UsageError(f"{option}: cannot write {path}: {error.strerror}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- Declarations ---------------------------------------------------------------
def _is_module_target(text: str) -> bool:
    """MODULE:ATTR (dotted names around one colon), not FILE.py[::NAME] nor a
    Windows path."""
    return re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", text) is not None


def _file_targets(text: str) -> list[Target]:
    """Each OpSpec of the file (or the one NAME), as the plugin finds them."""
    from jax_ladder.opcheck.plugin import specs_in

    where, _, name = text.partition("::")
    path = Path(where)
    if not path.is_file():
        raise UsageError(f"{where}: no such declaration file")
    namespace = _import_file(path)
    try:
        specs = specs_in(namespace, [name] if name else [], path.name)
    except ValueError as error:
        raise UsageError(_one_line(str(error))) from None
    targets = []
    for spec in specs:
        bound = name or next(k for k, v in namespace.items() if v is spec)
        targets.append(Target(spec, [f"{where}::{bound}"]))
    return targets


def _import_file(path: Path) -> dict[str, Any]:
    """The declaration module's namespace, imported as pytest's default
    import mode would: its folder first on sys.path, so that it imports its
    neighbours. A failure is a UsageError naming the error and where."""
    path = path.resolve()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem if path.stem not in sys.modules else f"_opcheck_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path.name}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        del sys.modules[name]
        raise UsageError(
            f"{path.name}: the declaration failed to import: {_error_at(error, path)}"
        ) from None
    return vars(module)


def _error_at(error: BaseException, path: Path | None = None) -> str:
    """`Type: message (file, line N)`, one line, at the deepest frame in
    `path` (else the deepest of all)."""
    frames = traceback.extract_tb(error.__traceback__)
    if isinstance(error, SyntaxError) and error.lineno:
        where = f" ({Path(error.filename or '?').name}, line {error.lineno})"
        return f"SyntaxError: {_one_line(error.msg)}{where}"
    mine = [f for f in frames if path is not None and Path(f.filename) == path] or frames
    where = f" ({Path(mine[-1].filename).name}, line {mine[-1].lineno})" if mine else ""
    message = _one_line(str(error))
    return f"{type(error).__name__}{': ' + message if message else ''}{where}"


def _signature_target(args: Args) -> list[Target]:
    """MODULE:ATTR with --signature: the function checked against itself in
    float64 on the CPU (reference = op, no oracle), at default sizes and
    tolerances, which the notes say."""
    from jax_ladder.opcheck.compare import Ulps
    from jax_ladder.opcheck.conformance import DEFAULT_LEADING, LEADING, OpSpec, parse_signature

    module_name, _, attr = args.declaration.partition(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` would: the current folder's modules
    try:
        op: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as error:
        raise UsageError(f"{args.declaration}: cannot import it: {_error_at(error)}") from None
    for part in attr.split("."):
        if not hasattr(op, part):
            raise UsageError(f"{args.declaration}: {op.__name__!r} has no attribute {part!r}")
        op = getattr(op, part)
    if not callable(op):
        raise UsageError(f"{args.declaration}: not a function ({type(op).__name__})")
    try:
        parsed = parse_signature(args.signature)
    except ValueError as error:  # DeclarationError: the column of the mistake
        raise UsageError(f"--signature: {_one_line(str(error))}") from None
    axes = [a for _, arg_axes, _ in parsed.args for a in arg_axes]
    named = list(dict.fromkeys(a for a in axes if a != LEADING))
    if len(named) > len(DEFAULT_SIZES):
        raise UsageError(f"--signature: more than {len(DEFAULT_SIZES)} axes; give --sizes")
    # An axis only an output has (x[b,n] -> [b,k]): its size is --sizes', or
    # the op's output's (jax.eval_shape at the arguments' sizes).
    outs = [a for _, out_axes in parsed.outputs for a in out_axes if a.isidentifier()]
    only_out = [a for a in dict.fromkeys(outs) if a not in named]
    sizes: dict[str, Any] = dict(zip(named, DEFAULT_SIZES, strict=False))
    if LEADING in axes:
        sizes[LEADING] = tuple(DEFAULT_LEADING)
    sizes.update(_parse_sizes(args.sizes, named + only_out, LEADING) if args.sizes else {})
    sizes.update(_output_sizes(op, parsed, sizes, [a for a in only_out if a not in sizes]))
    try:
        spec = OpSpec(
            name=args.declaration,
            op=op,
            reference=op,
            oracle=None,
            signature=args.signature,
            sizes=sizes,
            tolerance=Ulps(*DEFAULT_TOLERANCE),
            gradient_tolerance=Ulps(*DEFAULT_GRADIENT_TOLERANCE),
        )
    except (ValueError, TypeError) as error:  # DeclarationError: one line
        raise UsageError(f"--signature: {_one_line(str(error))}") from None
    shown = ", ".join(f"{k}={_size(v)}" for k, v in sizes.items())
    again = [args.declaration, "--signature", args.signature, "--sizes", shown.replace(" ", "")]
    notes = [
        f"sizes {shown} (--sizes to change them); tolerance "
        f"Ulps{DEFAULT_TOLERANCE}, gradients Ulps{DEFAULT_GRADIENT_TOLERANCE} "
        "(defaults: a declaration file sets its own)"
    ]
    return [Target(spec, again, SELF_ORACLE, notes)]


def _output_sizes(op: Any, parsed: Any, sizes: dict[str, Any], axes: list[str]) -> dict[str, int]:
    """The sizes of output-only axes, read off the op's abstract output
    (jax.eval_shape) at the arguments' sizes: the self-consistency check
    has no oracle to say them. A UsageError naming --sizes where it cannot."""
    if not axes:
        return {}
    import jax
    import jax.numpy as jnp

    from jax_ladder.opcheck.conformance import LEADING

    def shape(arg_axes: tuple[str, ...]) -> tuple[int, ...]:
        leading = tuple(sizes.get(LEADING, ()))
        return tuple(d for a in arg_axes for d in (leading if a == LEADING else (sizes[a],)))

    try:
        structs = [
            jax.ShapeDtypeStruct(shape(arg_axes), jnp.dtype(dtype or "float32"))  # type: ignore[no-untyped-call]
            for _, arg_axes, dtype in parsed.args
        ]
        results = jax.tree.leaves(jax.eval_shape(op, *structs))
    except Exception as error:
        raise UsageError(
            f"--signature: the sizes of {axes} (output-only axes) come from the op's output, "
            f"but jax.eval_shape of it raised {_error_at(error)}; give --sizes {axes[0]}=N"
        ) from None
    found: dict[str, int] = {}
    for (_, out_axes), result in zip(parsed.outputs, results, strict=False):
        # Axes after "..." count from the end, those before it from the start.
        cut = out_axes.index(LEADING) if LEADING in out_axes else len(out_axes)
        dims = result.shape
        tail = out_axes[cut + 1 :][::-1]
        placed = [*zip(out_axes[:cut], dims, strict=False), *zip(tail, dims[::-1], strict=False)]
        found.update({a: int(d) for a, d in placed if a in axes and a not in found})
    missing = [a for a in axes if a not in found]
    if missing:
        raise UsageError(
            f"--signature: no output of the op gives the size of {missing}; give --sizes"
        )
    return found


def _size(value: Any) -> str:
    """A size as --sizes takes it: N, or N*M for the leading axes' tuple."""
    return "*".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def _parse_sizes(text: str, named: list[str], leading: str) -> dict[str, Any]:
    """--sizes "b=8,n=16" (and "...=3*2": the leading axes' sizes)."""
    sizes: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        axis, equals, value = (x.strip() for x in part.partition("="))
        numbers = value.split("*") if axis == leading else [value]
        if not equals or not all(n.isdigit() and int(n) > 0 for n in numbers):
            raise UsageError(f"--sizes: {part!r} is not AXIS=N (N a positive whole number)")
        if axis not in named and axis != leading:
            raise UsageError(f"--sizes: the signature has no axis {axis!r} (it has {named})")
        sizes[axis] = tuple(int(n) for n in numbers) if axis == leading else int(value)
    return sizes
