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
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .conformance.draws import _into_domain
from .repro import script_roots, write_repro

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
    # The script run alone, in a fresh process (run_alone): REPRODUCED,
    # PASSES, or why it did not finish; "" where no script was written.
    alone: str = ""
    ran_before: tuple[str, ...] = ()  # the cells this process ran before it
    notes: tuple[str, ...] = ()  # what went wrong writing or running the script

    def lines(self) -> list[str]:
        """What a failed cell's message adds (check(..., shrink=True)): the
        sizes and values it still fails at, and the repro script, once it
        has been seen to fail alone."""
        if self.alone == PASSES:
            # Its sizes say nothing then: the failure needs what ran before.
            return [
                "shrunk: not reproduced alone: its script, run in a fresh process, passes "
                f"({self.script_path}), so the failure depends on state left by the cells run "
                f"before it in this process: {_some(self.ran_before)}",
                *self.notes,
            ]
        smaller = {a: s for a, s in self.sizes.items() if s != self.declared[a]}
        said = ", ".join(f"{a} = {s} (declared {self.declared[a]})" for a, s in smaller.items())
        lines = [
            f"shrunk: still fails at {said or 'the declared sizes'}, values {self.values} "
            f"({self.runs} runs of the cell)"
        ]
        if self.script_path is not None and self.alone == REPRODUCED:
            lines.append(f"repro: python {self.script_path}")
        elif self.script_path is not None:
            lines.append(f"repro script (not seen to fail alone: {self.alone}): {self.script_path}")
        return lines + list(self.notes)

    def __str__(self) -> str:
        return f"{self.spec_name} [{self.cell}] seed {self.seed}: " + "\n".join(self.lines())


# --- Running a cell, and what it drew -----------------------------------------
class _Copies(list[Any]):
    """A record that keeps a host copy of each draw as it is noted, before
    the cell calls the op: an op that donates its arguments (a jit with
    donate_argnums) deletes the very arrays the engine drew."""

    def append(self, entry: Any) -> None:
        kind, arrays, details = entry
        super().append((kind, [_host_copy(a) for a in arrays], details))


def _host_copy(array: Any) -> Any:
    try:
        return np.array(array, copy=True)
    except RuntimeError:  # deleted already: nothing left to copy
        return array


@contextlib.contextmanager
def recording() -> Iterator[list[Any]]:
    """While it lasts, the engine notes each cell's draws in the list it
    yields: (kind, arrays, details), kind one of args, hard, cotangents, vmap;
    each array a NumPy copy taken when it was drawn."""
    from .conformance import oracles

    record: list[Any] = _Copies()
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
    ran_before: Sequence[str] = (),
) -> Shrunk | None:
    """The smallest declaration found (sizes, then values) on which `cell`
    still fails as it does at `seed`; None where it does not fail. With
    repro_dir, also a script there that reproduces that failure alone
    (write_repro), run once alone in a fresh process (run_alone; ran_before:
    the cells this process ran first, which a failure it does not reproduce
    may depend on)."""
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
        spec.name,
        cell,
        seed,
        dict(final.sizes),
        dict(spec.sizes),
        values,
        failed.message,
        runs,
        ran_before=tuple(ran_before),
    )
    if repro_dir is not None:
        try:
            path = write_repro(final, cell, seed, drawn, failed.message, repro_dir, values=values)
        except Exception as error:  # the shrink's findings stand without a script
            note = f"no repro script: writing it raised {_one_line(error)}"
            return dataclasses.replace(shrunk, notes=(note,))
        shrunk = dataclasses.replace(shrunk, script_path=path, alone=run_alone(path, final))
    return shrunk


def shrink_lines(
    spec: Any,
    cell: str,
    seed: int,
    repro_dir: str | Path | None,
    ran_before: Sequence[str] = (),
) -> list[str]:
    """What check(), the command and the plugin add to a failed cell's
    message: shrink()'s lines, or why it could not shrink. Never raises: a
    report is worth more than a shrink, and a crash here would lose it."""
    try:
        found = shrink(spec, cell, seed, repro_dir, ran_before=ran_before)
    except Exception as error:
        return [f"shrunk: not shrunk: shrinking raised {_one_line(error)}"]
    return found.lines() if found is not None else ["shrunk: it passed when run again"]


def _one_line(error: BaseException) -> str:
    said = " ".join(str(error).split())
    return f"{type(error).__name__}{': ' + said if said else ''}"


def _some(cells: Sequence[str], shown: int = 8) -> str:
    if not cells:
        return "none (the state of the process it ran in)"
    more = f" … ({len(cells)} cells)" if len(cells) > shown else ""
    return ", ".join(cells[:shown]) + more


# --- The script, run alone ----------------------------------------------------------
REPRODUCED, PASSES = "reproduced", "passes"
ALONE_TIMEOUT_S = 300.0


def run_alone(path: Path, spec: Any, timeout_s: float = ALONE_TIMEOUT_S) -> str:
    """Run the repro script once in a fresh Python process, from the folder
    its docstring says (the op's module's, with PYTHONPATH=. and the other
    modules' folders): REPRODUCED (it exits 1 saying so), PASSES (exit 0:
    the failure needs state this process had), else what went wrong. This
    process's PYTHONPATH is kept after those folders (a kit not installed)."""
    roots = [str(r) for r in script_roots(spec)]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([*roots, *inherited]))}
    try:
        done = subprocess.run(
            [sys.executable, str(Path(path).resolve())],
            cwd=roots[0] if roots else Path(path).parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"it did not finish in {timeout_s:.0f} s"
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode == 1 and last.startswith(REPRODUCED):
        return REPRODUCED
    if done.returncode == 0:
        return PASSES
    error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return f"run alone, it stopped with {error}"


class _Spent(Exception):
    """The runs or the time a shrink may take are spent."""
