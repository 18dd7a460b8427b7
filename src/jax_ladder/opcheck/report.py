"""The conformance matrix as a call: `check(spec)` runs an op's cells in this
process and returns a Report of each cell, passed, refused (the declaration's
reason), failed (the error's first lines, in ulps where it is a comparison)
or skipped (why). The pytest plugin (plugin.py) runs the same cells as test
items, through the same helpers here.

What the cells need of JAX, and what check() does about it:
- float64, for the oracle and check_grads' finite differences: check()
  turns it on for its own duration only (`jax.enable_x64(True)`, JAX's
  context manager), so the caller's setting is back when it returns;
- four devices for a mesh (the sharding cells): the default platform's, or
  simulated CPU devices, whose count JAX fixes when its backend starts
  (`jax_num_cpu_devices`). check() changes no such setting: where there are
  too few, those cells are reported skipped, with what to set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import re
import time
import traceback as tb
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

from . import conformance
from .conformance import (
    NOTES,
    OpSpec,
    cell_names,
    check_declaration,
    refusal,
    run_cell,
    unknown_refusals,
)
from .failures import VALUE_MISSES, crash_advice, failure_kind, raised_by
from .support_table import FAMILIES

PASSED, REFUSED, FAILED, SKIPPED = "passed", "refused", "failed", "skipped"
MESSAGE_LINES = 8  # of a failure's message, kept in its result
CPU_DEVICES = 8  # what a generated project's conftest.py sets, and the plugin


@dataclass(frozen=True)
class CellResult:
    """One cell's outcome. `message`: for a refused cell the declaration's
    reason (Refuse.why); for a failed one the error's first lines (its
    first names the cell, the check, and the error in ulps); for a skipped
    one why. `seconds`: the cell's wall time; `seed`: check()'s seed, which
    with the op's and the cell's names seeds its inputs (seeded_rng)."""

    cell: str
    outcome: str  # PASSED, REFUSED, FAILED or SKIPPED
    message: str = ""
    seconds: float = 0.0
    seed: int = 0
    # For an error the cell raised (not a comparison): who raised it, the op,
    # the reference or the oracle, and where (file:line, in the deepest frame
    # outside JAX and the kit): raised_by.
    raised_by: str = ""
    raised_at: str = ""
    # The error's whole traceback (jax-ladder opcheck --tracebacks).
    traceback: str = field(default="", repr=False, compare=False)
    # What the cell saw and did not fail on (conformance.NOTES): the
    # collectives of a cell splitting an axis no declaration says is split.
    notes: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The family of cells it belongs to (cell_family)."""
        return cell_family(self.cell)

    @property
    def line(self) -> str:
        """Its message's first line ("" for none)."""
        return self.message.splitlines()[0] if self.message else ""


# Each family of cells a report groups failures by, from the support table's
# rows (support_table.FAMILIES), with jit's sharded inputs and shard_map as one.
_FAMILY_NAMES = {"jit, sharded inputs": "sharding", "shard_map": "sharding"}


def cell_family(cell: str) -> str:
    """The family a cell belongs to: values, vmap, sizes, autodiff, control
    flow, hard inputs, sharding or export (`<cell>@<dtype>`: its base cell's;
    a name no family knows: other). Cells of a family share most of their
    code, so their failures often share a cause."""
    base = cell.partition("@")[0]
    for prefix, family in FAMILIES.items():
        if base.startswith(prefix):
            return _FAMILY_NAMES.get(family, family)
    return "other"


@dataclass(frozen=True)
class FailureGroup:
    """Failed cells that likely share a cause: one family's (or several
    families' whose first failures say the same), `first` the first of
    them, `others` the rest, in the matrix's order."""

    families: tuple[str, ...]
    first: CellResult
    others: tuple[CellResult, ...]

    @property
    def cells(self) -> tuple[CellResult, ...]:
        return (self.first, *self.others)


# What two failures' first lines keep when compared for "the same message":
# not the cell's name, nor any number (ulps, indices, values).
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _gist(result: CellResult) -> str:
    line = result.line.removeprefix(f"[{result.cell}] ")
    return _NUMBER.sub("#", line.replace(result.cell, "<cell>"))


def group_failures(results: Iterable[CellResult]) -> list[FailureGroup]:
    """The failed results, grouped by family (cell_family), in the order of
    each family's first failure, each family's failures of one kind apart
    (failure_kind); families whose first failures have the same message (but
    for the cell's name and numbers) make one group."""
    failed = [r for r in results if r.outcome == FAILED]
    # One kind of failure a group: a family's crashes (by exception type) and
    # its comparisons (by what they compare) have different causes.
    by_family: dict[tuple[str, str], list[CellResult]] = {}
    for result in failed:
        by_family.setdefault((result.family, failure_kind(result)), []).append(result)
    merged: dict[str, tuple[list[str], list[CellResult]]] = {}
    for (family, _), cells in by_family.items():
        families, members = merged.setdefault(_gist(cells[0]), ([], []))
        families.append(family)
        members += cells
    order = {id(r): i for i, r in enumerate(failed)}
    groups = []
    for families, members in merged.values():
        members.sort(key=lambda r: order[id(r)])
        groups.append(FailureGroup(tuple(families), members[0], tuple(members[1:])))
    return groups


NAMES_SHOWN = 8  # of a group's other cells, named in "and N cells like it: ..."


def format_failures(
    groups: Iterable[FailureGroup],
    rerun: Callable[[list[str]], str] | None = None,
    indent: str = "  ",
    reference_fails: dict[str, str] | None = None,
) -> list[str]:
    """Lines for the grouped failures: per group its families, its first cell
    with its message's first line, then "and N cells like it: a, b, c…";
    with `rerun` (cells -> the command that runs them), the command that
    reruns the first cell, and where there are others the whole group;
    with `reference_fails` (cell -> the reference's own failure there, see
    reference_also_fails), that the reference fails the first cell too."""
    lines = []
    for group in groups:
        first = group.first
        lines.append(f"{indent}{', '.join(group.families)}: {first.cell}: {first.line}")
        kind = failure_kind(first)
        if kind.startswith("raised "):
            advice = crash_advice(first, kind.removeprefix("raised "))
            lines += [f"{indent}  {advice}"] if advice else []
        elif reference_fails and first.cell in reference_fails:
            own = reference_fails[first.cell].removeprefix(f"[{first.cell}] ")
            if _where(own) != _where(first.line.removeprefix(f"[{first.cell}] ")):
                lines.append(f"{indent}  {REFERENCE_FAILS_ELSEWHERE}: {own}")
            elif kind in VALUE_MISSES:
                lines.append(f"{indent}  {REFERENCE_FAILS_ALIKE}: {own}")
            else:  # not a matter of the inputs' domain: no declaration fixes it
                lines.append(f"{indent}  {REFERENCE_FAILS_TOO}: {own}")
        if group.others:
            names = [r.cell for r in group.others]
            shown = ", ".join(names[:NAMES_SHOWN]) + ("…" if len(names) > NAMES_SHOWN else "")
            like = "cell" if len(names) == 1 else "cells"
            lines.append(f"{indent}  and {len(names)} {like} like it: {shown}")
        if rerun is not None:
            lines.append(f"{indent}  rerun: {rerun([first.cell])}")
            if group.others:
                every = rerun([r.cell for r in group.cells])
                lines.append(f"{indent}  rerun all {len(group.cells)}: {every}")
    return lines


@dataclass(frozen=True)
class Report:
    """Every cell check() ran, in the matrix's order."""

    name: str  # the op's, OpSpec.name
    results: tuple[CellResult, ...]

    @property
    def ok(self) -> bool:
        """No cell failed (a skipped one did not run: see `skipped`)."""
        return not self.failed

    def _with(self, outcome: str) -> list[CellResult]:
        return [r for r in self.results if r.outcome == outcome]

    @property
    def passed(self) -> list[CellResult]:
        return self._with(PASSED)

    @property
    def refused(self) -> list[CellResult]:
        return self._with(REFUSED)

    @property
    def failed(self) -> list[CellResult]:
        return self._with(FAILED)

    @property
    def skipped(self) -> list[CellResult]:
        return self._with(SKIPPED)

    def __getitem__(self, cell: str) -> CellResult:
        for result in self.results:
            if result.cell == cell:
                return result
        raise KeyError(cell)

    def __iter__(self) -> Iterator[CellResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def seconds(self) -> float:
        """The cells' wall time, all together."""
        return sum(r.seconds for r in self.results)

    def counts(self) -> str:
        """ "6 passed, 1 refused": each outcome some cell had, with its count."""
        outcomes = (PASSED, REFUSED, FAILED, SKIPPED)
        return ", ".join(f"{len(self._with(o))} {o}" for o in outcomes if self._with(o)) or "none"

    def failure_groups(self) -> list[FailureGroup]:
        """The failed cells, grouped by likely cause (group_failures)."""
        return group_failures(self.results)

    def __str__(self) -> str:
        """Each cell and its outcome, with its message's first line; a failed
        cell after the first of its group says whose failure it is like, and
        the failures follow, grouped by likely cause (group_failures)."""
        lines = [f"{self.name}: {len(self.results)} cells: {self.counts()}"]
        groups = self.failure_groups()
        like = {r.cell: g.first.cell for g in groups for r in g.others}
        width = max((len(r.cell) for r in self.results), default=0)
        for r in self.results:
            first = f"like {like[r.cell]}" if r.cell in like else r.line
            first = first or "; ".join(f"noted: {n}" for n in r.notes)
            lines.append(f"  {r.cell:<{width}}  {r.outcome}{': ' + first if first else ''}")
        if groups:
            lines.append(f"failed, by likely cause ({len(groups)}):")
            lines += format_failures(groups)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data: the op, its totals (cells, each outcome's
        count, seconds) and each cell's name, family, outcome, message,
        seconds and seed."""
        totals: dict[str, Any] = {"cells": len(self.results)}
        totals.update({o: len(self._with(o)) for o in (PASSED, REFUSED, FAILED, SKIPPED)})
        totals["seconds"] = round(self.seconds, 6)
        cells = [
            {
                "cell": r.cell,
                "family": r.family,
                "outcome": r.outcome,
                "message": r.message,
                "seconds": round(r.seconds, 6),
                "seed": r.seed,
                **({"raised_by": r.raised_by} if r.raised_by else {}),
                **({"raised_at": r.raised_at} if r.raised_at else {}),
                **({"notes": list(r.notes)} if r.notes else {}),
            }
            for r in self.results
        ]
        return {"op": self.name, "ok": self.ok, "totals": totals, "cells": cells}

    def to_json(self, indent: int | None = 2) -> str:
        """to_dict() as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def junit_suite(self, classname: str = "opcheck") -> ET.Element:
        """The report as a JUnit <testsuite>: one <testcase> per cell (named
        as the plugin's items are, opcheck[op][cell]), a failed one with a
        <failure> whose message is its first line, a refused one passing
        (with the declared reason as its output), a skipped one <skipped>."""
        suite = ET.Element(
            "testsuite",
            name=f"opcheck[{self.name}]",
            tests=str(len(self.results)),
            failures=str(len(self.failed)),
            errors="0",
            skipped=str(len(self.skipped)),
            time=f"{self.seconds:.3f}",
        )
        for r in self.results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=classname,
                name=f"opcheck[{self.name}][{r.cell}]",
                time=f"{r.seconds:.3f}",
            )
            if r.outcome == FAILED:
                ET.SubElement(case, "failure", message=r.line, type="failed").text = r.message
            elif r.outcome == SKIPPED:
                ET.SubElement(case, "skipped", message=r.line)
            elif r.outcome == REFUSED:
                ET.SubElement(case, "system-out").text = f"refused: {r.message}"
        return suite

    def to_junit(self) -> str:
        """The report as JUnit XML (junit_xml of this report alone)."""
        return junit_xml([self])


def junit_xml(reports: Iterable[Report]) -> str:
    """JUnit XML, as a CI shows it: a <testsuites> of each report's suite."""
    root = ET.Element("testsuites")
    for report in reports:
        root.append(report.junit_suite())
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def select_cells(spec: OpSpec, patterns: Iterable[str] | str | None) -> list[str]:
    """The spec's cells that any of `patterns` (cell names or fnmatch globs:
    "grad-*") names, in the matrix's order; all of them for None. A pattern
    that names no cell is an error, not an empty selection."""
    names = cell_names(spec)
    if patterns is None:
        return names
    if isinstance(patterns, str):
        patterns = patterns.split(",")  # "eager,grad-*": no cell name has a comma
    patterns = [p.strip() for p in patterns if p.strip()]
    unknown = [p for p in patterns if not fnmatch.filter(names, p)]
    if unknown:
        raise ValueError(f"{spec.name}: no cell is named {unknown}; the cells are {names}")
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def seeded_rng(*keys: str | int) -> np.random.Generator:
    """A NumPy generator seeded from keys (a seed, a test's or cell's name):
    random, yet the same every run."""
    return np.random.default_rng(
        [k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys]
    )


class TooFewDevices(BaseException):
    """A cell's mesh needs more devices than JAX has. A BaseException, so that
    a declared refusal of Exception (pytest.raises) does not take it for the
    op's refusal."""

    def __init__(self, count: int, have: int) -> None:
        super().__init__(
            f"needs {count} devices for its mesh; JAX has {have} CPU device(s): set "
            f'jax.config.update("jax_num_cpu_devices", {CPU_DEVICES}) (or XLA_FLAGS='
            f"--xla_force_host_platform_device_count={CPU_DEVICES}) before JAX starts"
        )


@contextlib.contextmanager
def enough_devices() -> Iterator[None]:
    """While it lasts, a cell that asks for a mesh of more devices than JAX
    has raises TooFewDevices, instead of failing to build the mesh. (The
    cells take their devices from the mesh_devices of conformance's
    cells_sharding, which this wraps, changing nothing where there are enough.)"""
    namespace = vars(conformance.cells_sharding)
    original = namespace["mesh_devices"]

    def mesh_devices(count: int) -> list[jax.Device]:
        devices = list(original(count))
        if len(devices) < count:
            raise TooFewDevices(count, len(jax.devices("cpu")))
        return devices

    namespace["mesh_devices"] = mesh_devices
    try:
        yield
    finally:
        namespace["mesh_devices"] = original


@contextlib.contextmanager
def cell_environment() -> Iterator[None]:
    """What a cell runs in, besides the devices JAX started with: float64 on
    (for this context only) and meshes that say when they are too few."""
    with jax.enable_x64(True), enough_devices():
        yield


def run_one(spec: OpSpec, cell: str, rng: np.random.Generator, seed: int = 0) -> CellResult:
    """Run one cell (conformance.run_cell) and say how it went, in how long
    (`seed`: the seed rng was drawn from, recorded in the result)."""
    start = time.perf_counter()
    result = _run_one(spec, cell, rng)
    return dataclasses.replace(result, seconds=time.perf_counter() - start, seed=seed)


def _run_one(spec: OpSpec, cell: str, rng: np.random.Generator) -> CellResult:
    refuse = refusal(spec, cell)
    notes: list[str] = []
    token = NOTES.set(notes)
    try:
        with cell_environment():
            run_cell(spec, cell, rng)
    except TooFewDevices as why:
        return CellResult(cell, SKIPPED, str(why))
    except pytest.skip.Exception as why:
        return CellResult(cell, SKIPPED, str(why))
    except (Exception, pytest.fail.Exception) as error:
        # pytest.fail.Exception: a declared refusal that did not happen ("DID NOT RAISE").
        body = (str(error) or type(error).__name__).removeprefix(f"[{cell}] ")
        if not isinstance(error, AssertionError):
            body = f"{type(error).__name__}: {body}"
        if refuse is not None and not isinstance(error, pytest.fail.Exception):
            body = f"not the declared refusal ({_names(refuse.error)}): {body}"
        lines = f"[{cell}] {body}".splitlines()
        who = where = ""
        if not isinstance(error, (AssertionError, pytest.fail.Exception)):
            who, where = raised_by(spec, error)
            lines.insert(1, f"  raised by {who or 'JAX or the engine'}, at {where}")
        text = "".join(tb.format_exception(error))
        message = "\n".join(lines[:MESSAGE_LINES])
        return CellResult(cell, FAILED, message, raised_by=who, raised_at=where, traceback=text)
    finally:
        NOTES.reset(token)
    if refuse is not None:
        return CellResult(cell, REFUSED, refuse.why)
    return CellResult(cell, PASSED, notes=tuple(notes))


REFERENCE_FAILS_ALIKE = (
    "the plain-JAX reference fails it the same way, on the same inputs: they may be beyond "
    "what the problem supports in this dtype (declare Arg domain=/smallest=, or the cell in "
    "ill_conditioned=)"
)
REFERENCE_FAILS_ELSEWHERE = "the plain-JAX reference fails this cell too, but elsewhere"
REFERENCE_FAILS_TOO = "the plain-JAX reference fails it the same way, on the same inputs"


def _where(line: str) -> str:
    """What a failure's first line says failed (the check, output or
    gradient), without how far off: "jit, n = 1, output 0"."""
    return line.split(": off by ")[0].split(": ")[0]


def reference_also_fails(spec: OpSpec, cell: str, seed: int = 0) -> str | None:
    """The first line of the plain-JAX reference's own failure of `cell`, run
    as the op on the very inputs the op failed on (the same seed), or None
    where it passes. A cell the reference fails too is one whose inputs lie
    beyond what the problem allows in the cell's dtype (squares that
    overflow, a row of one element normalised), not only a bug of the op's:
    the fix is then in the declaration. The op's own refusals, extra
    collectives, kernel matmul precision and entry point for Auto shardings
    are not the reference's, so it runs without them."""
    if spec.reference is spec.op:  # jax-ladder opcheck --signature: nothing to learn
        return None
    twin = conformance.derived(
        spec, op=spec.reference, auto_op=None, refuse={}, extra_collectives={}, matmul_inputs={}
    )
    result = run_one(twin, cell, seeded_rng(seed, spec.name, cell), seed)
    return result.line if result.outcome == FAILED else None


def _names(error: Any) -> str:
    # getattr: a refusal may name a type JAX keeps private by its name (a str).
    errors = error if isinstance(error, tuple) else (error,)
    return " or ".join(getattr(e, "__name__", str(e)) for e in errors)


def check(
    spec: OpSpec,
    cells: Iterable[str] | str | None = None,
    seed: int = 0,
    *,
    shrink: bool = False,
    repro_dir: str | Path | None = None,
) -> Report:
    """Run the conformance matrix of the op `spec` declares, in this process.

    cells: the cells to run, by name or fnmatch glob ("grad-*"); None: all
    (conformance.cell_names). seed: each cell's inputs are drawn from a
    generator seeded with (seed, the op's name, the cell's name), so a cell
    draws the same inputs whichever others run. A refusal the declaration
    names for no cell (a typo would refuse nothing) raises ValueError; a
    reference or oracle whose results are not the declared outputs raises
    DeclarationError (a ValueError: conformance.check_declaration) before
    any cell runs.

    shrink: each failed cell is run again on smaller declarations
    (shrink.py), and its message says the smallest sizes it still fails
    at; with repro_dir, the standalone script that reproduces it there too.
    """
    unknown = unknown_refusals(spec)
    if unknown:
        raise ValueError(f"{spec.name}: declared refusals name no cell: {unknown}")
    with jax.enable_x64(True):  # the oracle's float64 inputs
        check_declaration(spec)
    results = [
        run_one(spec, cell, seeded_rng(seed, spec.name, cell), seed)
        for cell in select_cells(spec, cells)
    ]
    if shrink:
        ran = [r.cell for r in results]  # every cell ran before the first shrink
        results = [
            _shrunk(spec, r, seed, repro_dir, ran) if r.outcome == FAILED else r for r in results
        ]
    return Report(spec.name, tuple(results))


def _shrunk(
    spec: OpSpec, result: CellResult, seed: int, repro_dir: Any, ran: list[str]
) -> CellResult:
    """A failed cell's result, its message followed by what shrink.py found
    (or why it found nothing: shrinking never loses the report)."""
    from .shrink import shrink_lines

    lines = shrink_lines(spec, result.cell, seed, repro_dir, ran)
    return dataclasses.replace(result, message="\n".join([result.message, *lines]))
