"""A failing cell made small, and a script that reproduces it alone.

`shrink(spec, cell, seed)` takes a cell that fails (check() names its seed)
and looks for a smaller declaration that fails the same cell the same way:

1. each named axis's size, in the declaration's order, tried from 1 upward
   (1 to 8, then about 1.5x each step, below the declared size), then
   bisected between the largest size that passed and the first that failed;
2. then the inputs' values: every floating argument drawn as small integers
   (a standard normal rounded), else as multiples of 1/2 (both mapped into
   the argument's domain as the engine maps its draws). Not for the hard-*
   cells, whose values are the point, nor an argument with its own sample.

"The same way" is the failure's first line with its numbers taken out: the
check and output it names and what kind of failure it is (off by, a shape,
a non-finite value, an exception's type). A smaller size that fails
otherwise (a mesh's divisibility, a NaN where the bug was an offset) is
another bug, and is not taken. Each try is one run of the cell (a jit
compile or several): at most `max_runs` of them and `budget_s` seconds.

Then `write_repro` (repro.py) writes a script, plain JAX and NumPy without
jax_ladder where it can, that reproduces that failure alone, from the
inputs the engine drew: while a cell runs under `recording()` the engine
notes each draw (DRAWN in conformance/oracles.py).

Hypothesis: not used. A cell's inputs are structured arrays whose shape
comes from a declaration, each example costs a jit compile (a second or
more), and the failure is already found: what is left to shrink is a few
named sizes and how simple the values are, which a deterministic search
covers in a few dozen runs, the same each time for the same seed.
Hypothesis would shrink the byte stream behind its strategies, not those
named sizes, need a strategy per Arg (sample, domain, smallest) that the
engine already draws, spend its example budget on compiles under its
deadline and health checks, and add a dependency and a database to a kit
whose runs are reproducible from one integer seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .conformance.oracles import _into_domain
from .repro import write_repro

MAX_RUNS = 40
BUDGET_S = 300.0


@dataclass(frozen=True)
class Shrunk:
    """A failing cell made small: the declaration's sizes where it still
    fails (`sizes`, every axis; `declared`, the original ones), the values it
    was drawn as (`values`: as declared, small integers or halves), its
    failure there (`message`), the runs it took, and the repro script's
    path (None where none was asked for)."""

    spec_name: str
    cell: str
    seed: int
    sizes: Mapping[str, int]
    declared: Mapping[str, int]
    values: str
    message: str
    runs: int
    script_path: Path | None = None

    def lines(self) -> list[str]:
        """What a failed cell's message adds (check(..., shrink=True)): the
        sizes and values it still fails at, and the repro script."""
        smaller = {a: s for a, s in self.sizes.items() if s != self.declared[a]}
        said = ", ".join(f"{a} = {s} (declared {self.declared[a]})" for a, s in smaller.items())
        lines = [
            f"shrunk: still fails at {said or 'the declared sizes'}, values {self.values} "
            f"({self.runs} runs of the cell)"
        ]
        if self.script_path is not None:
            lines.append(f"repro: python {self.script_path}")
        return lines

    def __str__(self) -> str:
        return f"{self.spec_name} [{self.cell}] seed {self.seed}: " + "\n".join(self.lines())


# --- Running a cell, and what it drew -----------------------------------------
@contextlib.contextmanager
def recording() -> Iterator[list[Any]]:
    """While it lasts, the engine notes each cell's draws in the list it
    yields: (kind, arrays, details), kind one of args, hard, cotangents, vmap."""
    from .conformance import oracles

    record: list[Any] = []
    token = oracles.DRAWN.set(record)
    try:
        yield record
    finally:
        oracles.DRAWN.reset(token)


def _run(spec: Any, cell: str, seed: int) -> tuple[Any, list[Any]]:
    """One run of the cell as check() runs it: its CellResult and its draws."""
    from . import conformance
    from .report import cell_environment, run_one, seeded_rng

    # What run_cell checks once per declaration first, drawing inputs of its
    # own: before the recording (a declaration it refuses, the run reports).
    with contextlib.suppress(Exception), cell_environment():
        getattr(conformance, "check_declaration", lambda spec: None)(spec)
    with recording() as record:
        result = run_one(spec, cell, seeded_rng(seed, spec.name, cell))
    return result, record


def signature(message: str) -> str:
    """How a cell failed, without the numbers that change with the inputs:
    the check and output its first line names, and the kind of failure."""
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"^\[[^\]]*\]\s*", "", first)
    where, _, rest = first.partition(": ")
    kind = rest.split(" ", 1)[0] if rest else ""
    return re.sub(r"[-+]?\d[\d.e+-]*", "#", f"{where}: {kind}")


# --- Shrinking ------------------------------------------------------------------
def _candidates(declared: int) -> list[int]:
    """Sizes to try below the declared one: 1 to 8, then about 1.5x a step."""
    sizes, size = [], 1
    while size < declared:
        sizes.append(size)
        size = size + 1 if size < 8 else (size * 3 + 1) // 2
    return sizes


def _rounded(arg: Any, step: float) -> Any:
    """arg drawn as standard normals rounded to multiples of step, mapped
    into its domain as the engine maps its draws."""

    def sample(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        values = np.round(rng.standard_normal(shape) / step) * step + 0.0  # no -0.0
        return _into_domain(arg, values)

    return dataclasses.replace(arg, sample=sample)


VALUES = {"small integers": 1.0, "halves": 0.5}


def shrink(
    spec: Any,
    cell: str,
    seed: int = 0,
    repro_dir: str | Path | None = None,
    *,
    max_runs: int = MAX_RUNS,
    budget_s: float = BUDGET_S,
) -> Shrunk | None:
    """The smallest declaration found (sizes, then values) on which `cell`
    still fails as it does at `seed`; None where it does not fail. With
    repro_dir, also a script there that reproduces that failure alone
    (write_repro)."""
    start, runs = time.monotonic(), 0
    result, record = _run(spec, cell, seed)
    runs += 1
    if result.outcome != "failed":
        return None
    wanted = signature(result.message)
    best = (spec, result, record, "as declared")

    def fails(changes: Mapping[str, Any]) -> bool:
        """Whether the smallest declaration so far, with these changes, fails
        the same way (one the declaration language refuses does not)."""
        nonlocal runs, best
        if runs >= max_runs or time.monotonic() - start > budget_s:
            raise _Spent
        try:
            candidate = dataclasses.replace(best[0], **changes)
        except (ValueError, TypeError):
            return False
        got, drawn = _run(candidate, cell, seed)
        runs += 1
        if got.outcome == "failed" and signature(got.message) == wanted:
            best = (candidate, got, drawn, best[3])
            return True
        return False

    with contextlib.suppress(_Spent):
        for axis in spec.axes:
            current = best[0]
            declared, passed = current.sizes[axis], 0
            for size in _candidates(declared):
                if fails({"sizes": {**current.sizes, axis: size}}):
                    # Bisect between the largest size that passed and this one.
                    low, high = passed, size
                    while high - low > 1:
                        middle = (low + high) // 2
                        trial = {"sizes": {**current.sizes, axis: middle}}
                        low, high = (low, middle) if fails(trial) else (middle, high)
                    break
                passed = size
        if not cell.split("@")[0].startswith("hard-"):
            for name, step in VALUES.items():
                current = best[0]
                try:
                    args = tuple(
                        _rounded(a, step) if a.sample is None and a.dtype is None else a
                        for a in current.args
                    )
                except (ValueError, TypeError):  # an Arg the declaration language refuses
                    continue
                if args != current.args and fails({"args": args}):
                    best = (*best[:3], name)
                    break
    final, failed, drawn, values = best
    shrunk = Shrunk(
        spec.name, cell, seed, dict(final.sizes), dict(spec.sizes), values, failed.message, runs
    )
    if repro_dir is not None:
        path = write_repro(final, cell, seed, drawn, failed.message, repro_dir, values=values)
        shrunk = dataclasses.replace(shrunk, script_path=path)
    return shrunk


class _Spent(Exception):
    """The runs or the time a shrink may take are spent."""
