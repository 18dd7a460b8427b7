"""The pytest plugin: an op's declaration file becomes test items, one per
cell of its conformance matrix, in the suite of any repository.

Installing the kit registers it (the `pytest11` entry point), and it stays
inert until a run names a declaration file: in pytest's configuration,

    [tool.pytest.ini_options]
    opcheck_specs = ["tests/softplus_spec.py"]

or on the command line, `--opcheck tests/softplus_spec.py`, which names the
run's declarations instead of opcheck_specs. Each OpSpec at the top level of
a named file (or only NAME, for `path.py::NAME`) gives the items
`opcheck[<op name>][<cell>]`, collected with that file (it must lie where
pytest collects: under `testpaths`, say; the summary names one not
collected), and `opcheck[<op name>][refusals]`, which fails where a declared
refusal names no cell. A file that fails to import, or declares no OpSpec,
gives one failed item (`opcheck[import]`, `opcheck[declaration]`), and the
rest of the suite runs. `opcheck_cells` (ini) or `--opcheck-cells
"eager,jit,grad-*"` selects cells by name or glob; -k works as on any test.

A cell draws its inputs as `check(spec, cells=cell, seed=S)` does
(report.seeded_rng(S, op name, cell)), S from `--opcheck-seed` (0);
`--opcheck-seeds N` runs each cell with S..S+N-1, as the items
`<name>[seed-<s>]`. A failed cell shows its error's first line (which
names the cell), its seed and the commands that rerun it alone (pytest, and
check()); `--opcheck-tracebacks` or `--tb=long` shows the whole traceback.

Where a declaration names where the suite looks its op up (`INTERCEPT =
"mypkg.ops:softplus"`), `--opcheck-record` records the arguments of the op's
calls while the suite runs and writes them beside the declaration
(`<stem>.recorded.npz`); a run that finds that file also makes the items
`opcheck[<op name>][recorded-<i>][<cell>]`, each recording through the
cells `opcheck_replay_cells` / `--opcheck-replay-cells` select (default:
those that run at any size); a failure names the test that made the call.
An item listed in `opcheck_failures.json` beside the declaration ({item
name: reason}) is an expected failure (xfail, strict);
`--opcheck-write-failures` runs them all unmarked and writes the run's
failures there (intercept.py).

Where it is active, before JAX starts (before the conftest files load, when
the plugin is installed or named with -p), it sets 8 simulated CPU devices
(`jax_num_cpu_devices`), as a generated project's conftest.py does, unless
the run already chose a count (that setting, or XLA_FLAGS'
--xla_force_host_platform_device_count): the sharding cells' meshes need 4.
Where JAX started before with too few, those cells skip, saying so. Each
cell runs with float64 on for its own duration (jax.enable_x64): the rest
of the suite keeps its own setting.

Here, the options and the hooks; the items (a declaration file's
collection, its cells, what a failed one shows) are plugin_items.py. Both
import only pytest until a run is active: JAX and the engine load when the
declarations do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import pytest

# The items and their collection (plugin_items.py); specs_in and declared_specs
# stay importable from here (`jax-ladder opcheck` imports specs_in so).
from .plugin_items import CELLS_INI, COLLECTED, REPLAY_CELLS_INI, Cell, Declarations
from .plugin_items import declared_specs as declared_specs
from .plugin_items import specs_in as specs_in

SPECS_INI = "opcheck_specs"
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
        "for this run, instead of the opcheck_specs ini option)",
    )
    group.addoption(
        "--opcheck-seed",
        type=int,
        default=0,
        metavar="S",
        help="seed each cell's inputs as check(spec, cells=cell, seed=S) does (default 0)",
    )
    group.addoption(
        "--opcheck-seeds",
        type=int,
        default=1,
        metavar="N",
        help="run each cell with the seeds S..S+N-1, as the items <name>[seed-<s>] (default 1)",
    )
    group.addoption(
        "--opcheck-tracebacks",
        action="store_true",
        help="a failed cell shows its whole traceback, not its one-line message "
        "(so does --tb=long)",
    )
    group.addoption(
        "--opcheck-shrink",
        action="store_true",
        help="a failed cell is run again on smaller declarations (its axes' sizes, then "
        "its values: jax_ladder.opcheck.shrink), and its failure names the smallest "
        "that still fails and a standalone script reproducing it, in --opcheck-repro-dir",
    )
    group.addoption(
        "--opcheck-repro-dir",
        default="opcheck-repro",
        metavar="DIR",
        help="where --opcheck-shrink writes its repro scripts (default opcheck-repro)",
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
    group.addoption(
        "--opcheck-record",
        action="store_true",
        help="record the arguments the suite gives each op a declaration's INTERCEPT "
        "names, into <declaration stem>.recorded.npz beside it",
    )
    group.addoption(
        "--opcheck-replay-cells",
        default=None,
        metavar="GLOBS",
        help="the cells each recording replays through; default: the "
        "opcheck_replay_cells ini option, else eager, jit, vmap-new-axis, grad-<arg>, vjp, jvp",
    )
    group.addoption(
        "--opcheck-write-failures",
        action="store_true",
        help="run the listed expected failures unmarked and write this run's failures "
        "to opcheck_failures.json beside each declaration",
    )
    parser.addini(CELLS_INI, type="linelist", default=[], help="the cells to run (names, globs)")
    parser.addini(
        REPLAY_CELLS_INI, type="linelist", default=[], help="the cells a recording replays through"
    )


def declared(config: pytest.Config) -> dict[Path, list[str]]:
    """Each declaration file the run names -> the names of its OpSpecs to
    take (empty: every one in it). --opcheck, where given, names them for
    this run instead of the opcheck_specs ini option."""
    named = config.getoption("opcheck") or []
    if named:
        entries = [(config.invocation_params.dir, e) for e in named]
    else:
        base = config.inipath.parent if config.inipath else config.rootpath
        entries = [(base, e) for e in config.getini(SPECS_INI)]
    files: dict[Path, list[str]] = {}
    for folder, entry in entries:
        path, _, name = entry.partition("::")
        names = files.setdefault((folder / path).resolve(), [])
        if name:
            names.append(name)
    return files


def active(config: pytest.Config) -> bool:
    return bool(config.getini(SPECS_INI) or config.getoption("opcheck"))


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
    if config.getoption("opcheck_record"):
        start_recording(config)
    if config.getoption("opcheck_write_failures"):
        config.stash[OUTCOMES] = Outcomes()
        config.pluginmanager.register(config.stash[OUTCOMES], "opcheck-outcomes")


RECORDERS = pytest.StashKey[list[Any]]()  # intercept.Recorder, for each INTERCEPT
OUTCOMES = pytest.StashKey["Outcomes"]()
WRITTEN = pytest.StashKey[list[str]]()  # what the run wrote, for its summary


def start_recording(config: pytest.Config) -> None:
    """Each declaration's INTERCEPT replaced by its recorder's wrapper, for
    the run: before the suite's modules (and the declarations) import it."""
    if getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--opcheck-record records in one process: add -n 0")
    from .intercept import Recorder, intercepts

    recorders = []
    stack = contextlib.ExitStack()
    config.add_cleanup(stack.close)
    for path in declared(config):
        try:
            for op, target in intercepts(path).items():
                recorder = Recorder(path, op, target)
                stack.enter_context(recorder.installed())
                recorders.append(recorder)
        except (ValueError, ImportError, AttributeError, SyntaxError) as error:
            raise pytest.UsageError(f"--opcheck-record: {type(error).__name__}: {error}") from error
    if not recorders:
        raise pytest.UsageError(
            f"--opcheck-record: no declaration names its op's INTERCEPT ({list(declared(config))})"
        )
    config.stash[RECORDERS] = recorders


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """While recording: which test made each call, and not the calls of the
    matrix's own cells."""
    if not item.config.stash.get(RECORDERS, None):
        return (yield)
    from .intercept import Recorder

    Recorder.current = item.nodeid
    Recorder.paused += isinstance(item, Cell)
    try:
        return (yield)
    finally:
        Recorder.paused -= isinstance(item, Cell)
        Recorder.current = ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """With --opcheck-write-failures, each cell's outcome (its error's first
    line, or None where it passed), carried by the report (through
    pytest-xdist's workers too) to the run's end."""
    report = yield
    if (
        isinstance(item, Cell)
        and call.when == "call"
        and item.config.getoption("opcheck_write_failures")
    ):
        from .intercept import failures_path

        error = None
        if call.excinfo is not None and report.failed:
            value = call.excinfo.value
            error = (str(value) or type(value).__name__).splitlines()[0]
            if not isinstance(value, AssertionError):
                error = f"{type(value).__name__}: {error}"
        if report.passed or report.failed:
            where = str(failures_path(item.path))
            report.user_properties.append(("opcheck", (where, item.name, error)))
    return report


class Outcomes:
    """With --opcheck-write-failures, a plugin of the run: each cell's
    outcome as its report arrives (here, the controller, under xdist)."""

    def __init__(self) -> None:
        self.by_file: dict[Path, dict[str, str | None]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == "opcheck":
                where, name, error = cast("tuple[str, str, str | None]", value)
                self.by_file.setdefault(Path(where), {})[name] = error


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write what the run recorded, and with --opcheck-write-failures, the
    expected failures."""
    config = session.config
    if not active(config) or hasattr(config, "workerinput"):  # xdist: the controller writes
        return
    from .intercept import recordings_path, write, write_failures

    def shown(path: Path) -> str:
        """path from the run's root, where it lies under it."""
        root = config.rootpath
        return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)

    written: list[str] = []
    recorders = config.stash.get(RECORDERS, [])
    for path in declared(config):
        mine = [r for r in recorders if r.declaration == path]
        written += [f"opcheck: recorded {recorder.summary()}" for recorder in mine]
        if any(r.kept for r in mine):
            count = write(recordings_path(path), mine)
            written.append(f"opcheck: wrote {count} recording(s) to {shown(recordings_path(path))}")
        elif mine:
            written.append(f"opcheck: nothing recorded for {shown(path)}: no file written")
    if OUTCOMES in config.stash:
        for where, outcomes in sorted(config.stash[OUTCOMES].by_file.items()):
            listed = write_failures(where, outcomes)
            written.append(f"opcheck: wrote {len(listed)} expected failure(s) to {shown(where)}")
    config.stash[WRITTEN] = written


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """What the run wrote (recordings, expected failures), and where a named
    declaration's cells never ran: its file lay outside the paths this run
    collected. (From the run's reports, which pytest-xdist's workers send
    here too.)"""
    if not active(config):
        return
    for line in config.stash.get(WRITTEN, []):
        terminalreporter.write_line(line)
    seen = {
        getattr(report, "nodeid", "").split("::")[0]
        for reports in terminalreporter.stats.values()
        for report in reports
    }
    # Collected here (--collect-only reports no test), or by pytest-xdist's workers.
    collected = config.stash.get(COLLECTED, set())
    for path in declared(config):
        reported = any(seen_path and config.rootpath / seen_path == path for seen_path in seen)
        if path not in collected and not reported:
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
