"""The pytest plugin: an op's declaration file becomes test items, one per
cell of its conformance matrix, in the suite of any repository.

Installing the kit registers it (the `pytest11` entry point), and it stays
inert until a run names a declaration file: in pytest's configuration,

    [tool.pytest.ini_options]
    opcheck_specs = ["tests/softplus_spec.py"]

or on the command line, `--opcheck tests/softplus_spec.py`. Each OpSpec at
the top level of a named file (or only NAME, for `path.py::NAME`) gives
the items `opcheck[<op name>][<cell>]`, collected with that file (it must
lie where pytest collects: under `testpaths`, say; the summary names one
not collected), and `opcheck[<op name>][refusals]`, which fails where a
declared refusal names no cell. `opcheck_cells` (ini) or `--opcheck-cells "eager,jit,grad-*"`
selects cells by name or glob; -k works as on any test.

Where it is active, before JAX starts (before the conftest files load, when
the plugin is installed or named with -p), it sets 8 simulated CPU devices
(`jax_num_cpu_devices`), as a generated project's conftest.py does, unless
the run already chose a count (that setting, or XLA_FLAGS'
--xla_force_host_platform_device_count): the sharding cells' meshes need 4.
Where JAX started before with too few, those cells skip, saying so. Each
cell runs with float64 on for its own duration (jax.enable_x64): the rest
of the suite keeps its own setting.

This module imports only pytest until a run is active: JAX and the engine
load when the declarations do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .conformance import OpSpec

SPECS_INI = "opcheck_specs"
CELLS_INI = "opcheck_cells"
CPU_DEVICES = 8  # report.CPU_DEVICES: the sharding cells need 4, a project's conftest sets 8
FORCE_FLAG = "--xla_force_host_platform_device_count"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opcheck", "jax-ladder's conformance matrix (jax_ladder.opcheck)")
    group.addoption(
        "--opcheck",
        action="append",
        default=[],
        metavar="PATH[::NAME]",
        help="a declaration file whose OpSpecs become test items (repeatable; "
        "adds to the opcheck_specs ini option)",
    )
    group.addoption(
        "--opcheck-cells",
        default=None,
        metavar="GLOBS",
        help='the cells to run, comma-separated names or globs ("eager,jit,grad-*"); '
        "default: the opcheck_cells ini option, else all",
    )
    parser.addini(
        SPECS_INI,
        type="linelist",
        default=[],
        help="declaration files (PATH or PATH::NAME, relative to the configuration "
        "file) whose OpSpecs become test items; none: the plugin does nothing",
    )
    parser.addini(CELLS_INI, type="linelist", default=[], help="the cells to run (names, globs)")


def declared(config: pytest.Config) -> dict[Path, list[str]]:
    """Each declaration file the run names -> the names of its OpSpecs to
    take (empty: every one in it)."""
    base = config.inipath.parent if config.inipath else config.rootpath
    entries = [(base, e) for e in config.getini(SPECS_INI)]
    invoked = config.invocation_params.dir
    entries += [(invoked, e) for e in config.getoption("opcheck") or []]
    files: dict[Path, list[str]] = {}
    for folder, entry in entries:
        path, _, name = entry.partition("::")
        names = files.setdefault((folder / path).resolve(), [])
        if name:
            names.append(name)
    return files


def active(config: pytest.Config) -> bool:
    return bool(config.getini(SPECS_INI) or config.getoption("opcheck"))


def cell_patterns(config: pytest.Config) -> list[str] | None:
    option = config.getoption("opcheck_cells")
    patterns = option.split(",") if option else config.getini(CELLS_INI)
    return [p.strip() for p in patterns if p.strip()] or None


def simulate_cpu_devices() -> None:
    """8 CPU devices, where JAX has not started and the run chose no count."""
    import jax

    chosen = jax.config.jax_num_cpu_devices >= 0 or FORCE_FLAG in os.environ.get("XLA_FLAGS", "")
    if chosen:
        return
    # Where JAX has started, it refuses: the sharding cells then skip, saying why.
    with contextlib.suppress(RuntimeError):
        jax.config.update("jax_num_cpu_devices", CPU_DEVICES)  # type: ignore[no-untyped-call]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before the conftest files, which may import JAX and start it.
    # The command line is parsed in full only later: its known arguments now.
    named = getattr(early_config.known_args_namespace, "opcheck", None)
    if early_config.getini(SPECS_INI) or named:
        simulate_cpu_devices()


def pytest_configure(config: pytest.Config) -> None:
    if not active(config):
        return
    missing = [str(p) for p in declared(config) if not p.is_file()]
    if missing:
        raise pytest.UsageError(f"{SPECS_INI} or --opcheck: no such declaration file {missing}")
    # Again, for a run where the plugin came later (a conftest's pytest_plugins).
    simulate_cpu_devices()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say so where a named declaration's cells never ran: its file lay
    outside the paths this run collected. (From the run's reports, which
    pytest-xdist's workers send here too.)"""
    if not active(config):
        return
    seen = {
        getattr(report, "nodeid", "").split("::")[0]
        for reports in terminalreporter.stats.values()
        for report in reports
    }
    for path in declared(config):
        if not any(seen_path and config.rootpath / seen_path == path for seen_path in seen):
            terminalreporter.write_line(
                f"opcheck: {path} was not collected (outside the paths this run collects): "
                "its cells did not run"
            )


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[Any], list[Any]]:
    collected = yield
    files = declared(parent.config) if active(parent.config) else {}
    if file_path.resolve() not in files:
        return collected
    # A declaration file named like a test module is collected by pytest's
    # Python plugin too: this module takes its place (and its tests).
    others = [c for c in collected if not isinstance(c, pytest.Module)]
    names = files[file_path.resolve()]
    return [*others, Declarations.from_parent(parent, path=file_path, names=names)]


class Declarations(pytest.Module):
    """A declaration file: the tests it holds, if any, and each OpSpec's cells."""

    def __init__(self, *, names: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.names = names

    def collect(self) -> Any:
        from .conformance import OpSpec

        found = list(super().collect())
        module = vars(self.obj)
        if self.names:
            missing = [n for n in self.names if not isinstance(module.get(n), OpSpec)]
            if missing:
                raise self.CollectError(f"{self.path.name} has no OpSpec named {missing}")
            specs = [module[n] for n in self.names]
        else:
            specs = list({id(v): v for v in module.values() if isinstance(v, OpSpec)}.values())
            if not specs:
                raise self.CollectError(f"{self.path.name} declares no OpSpec")
        for spec in specs:
            found += list(cells_of(self, spec))
        return found


def cells_of(parent: Declarations, spec: OpSpec) -> Iterator[pytest.Item]:
    from .report import select_cells

    yield Refusals.from_parent(parent, name=f"opcheck[{spec.name}][refusals]", spec=spec)
    try:
        cells = select_cells(spec, cell_patterns(parent.config))
    except ValueError as error:
        raise parent.CollectError(str(error)) from error
    for cell in cells:
        yield Cell.from_parent(parent, name=f"opcheck[{spec.name}][{cell}]", spec=spec, cell=cell)


class Cell(pytest.Item):
    """One cell: it matches the oracle, or raises the refusal declared for it."""

    def __init__(self, *, spec: OpSpec, cell: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.cell = cell

    def runtest(self) -> None:
        from .conformance import run_cell
        from .report import TooFewDevices, cell_environment, seeded_rng

        try:
            with cell_environment():
                run_cell(self.spec, self.cell, seeded_rng(self.nodeid))
        except TooFewDevices as why:
            pytest.skip(str(why))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)  # its first line names the cell, the check and the ulps
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class Refusals(Cell):
    """Every declared refusal names a cell (a typo would refuse nothing)."""

    def runtest(self) -> None:
        from .conformance import unknown_refusals

        unknown = unknown_refusals(self.spec)
        assert not unknown, f"{self.spec.name}: declared refusals name no cell: {unknown}"
