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
import fnmatch
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import jax
import numpy as np
import pytest

from . import conformance
from .conformance import OpSpec, cell_names, refusal, run_cell, unknown_refusals

PASSED, REFUSED, FAILED, SKIPPED = "passed", "refused", "failed", "skipped"
MESSAGE_LINES = 8  # of a failure's message, kept in its result
CPU_DEVICES = 8  # what a generated project's conftest.py sets, and the plugin


@dataclass(frozen=True)
class CellResult:
    """One cell's outcome. `message`: for a refused cell the declaration's
    reason (Refuse.why); for a failed one the error's first lines (its
    first names the cell, the check, and the error in ulps); for a skipped
    one why."""

    cell: str
    outcome: str  # PASSED, REFUSED, FAILED or SKIPPED
    message: str = ""


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

    def __str__(self) -> str:
        counts = ", ".join(
            f"{len(self._with(o))} {o}" for o in (PASSED, REFUSED, FAILED, SKIPPED) if self._with(o)
        )
        lines = [f"{self.name}: {len(self.results)} cells: {counts or 'none'}"]
        width = max((len(r.cell) for r in self.results), default=0)
        for r in self.results:
            first = r.message.splitlines()[0] if r.message else ""
            lines.append(f"  {r.cell:<{width}}  {r.outcome}{': ' + first if first else ''}")
        return "\n".join(lines)


def select_cells(spec: OpSpec, patterns: Iterable[str] | str | None) -> list[str]:
    """The spec's cells that any of `patterns` (cell names or fnmatch globs:
    "grad-*") names, in the matrix's order; all of them for None. A pattern
    that names no cell is an error, not an empty selection."""
    names = cell_names(spec)
    if patterns is None:
        return names
    if isinstance(patterns, str):
        patterns = [patterns]
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
    cells take their devices from conformance's mesh_devices, which this
    wraps, changing nothing where there are enough.)"""
    namespace = vars(conformance)
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


def run_one(spec: OpSpec, cell: str, rng: np.random.Generator) -> CellResult:
    """Run one cell (conformance.run_cell) and say how it went."""
    refuse = refusal(spec, cell)
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
        lines = f"[{cell}] {body}".splitlines()[:MESSAGE_LINES]
        return CellResult(cell, FAILED, "\n".join(lines))
    if refuse is not None:
        return CellResult(cell, REFUSED, refuse.why)
    return CellResult(cell, PASSED)


def _names(error: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    return " or ".join(e.__name__ for e in (error if isinstance(error, tuple) else (error,)))


def check(spec: OpSpec, cells: Iterable[str] | str | None = None, seed: int = 0) -> Report:
    """Run the conformance matrix of the op `spec` declares, in this process.

    cells: the cells to run, by name or fnmatch glob ("grad-*"); None: all
    (conformance.cell_names). seed: each cell's inputs are drawn from a
    generator seeded with (seed, the op's name, the cell's name), so a cell
    draws the same inputs whichever others run. A refusal the declaration
    names for no cell (a typo would refuse nothing) raises ValueError.
    """
    unknown = unknown_refusals(spec)
    if unknown:
        raise ValueError(f"{spec.name}: declared refusals name no cell: {unknown}")
    results = [
        run_one(spec, cell, seeded_rng(seed, spec.name, cell)) for cell in select_cells(spec, cells)
    ]
    return Report(spec.name, tuple(results))
