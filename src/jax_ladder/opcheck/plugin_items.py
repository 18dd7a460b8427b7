"""The pytest plugin's items (plugin.py registers the hooks): a declaration
file collected as a module of the suite (Declarations), each OpSpec's cells
(Cell, one per cell and seed; Refusals; Broken, for a file or recording
that cannot be run), and what a failed cell shows: its error's first line,
its seed and the commands that rerun it alone.

Like plugin.py, it imports only pytest: JAX and the engine load when a
declaration or a cell does.
"""

from __future__ import annotations

import os
import shlex
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:
    from .conformance import OpSpec

CELLS_INI = "opcheck_cells"
REPLAY_CELLS_INI = "opcheck_replay_cells"
COLLECTED = pytest.StashKey[set[Path]]()  # the declarations this process collected
RAN = pytest.StashKey[list[str]]()  # the cells this process ran, in order


def cell_patterns(config: pytest.Config, option: str = "opcheck_cells") -> list[str] | None:
    given = config.getoption(option)
    ini = REPLAY_CELLS_INI if option == "opcheck_replay_cells" else CELLS_INI
    patterns = given.split(",") if given else config.getini(ini)
    return [p.strip() for p in patterns if p.strip()] or None


def declared_specs(namespace: Mapping[str, Any]) -> list[OpSpec]:
    """Every OpSpec at the top level of a declaration module (its vars()),
    each once (one bound to two names too), in the module's order."""
    from .conformance import OpSpec

    return list({id(v): v for v in namespace.values() if isinstance(v, OpSpec)}.values())


def specs_in(namespace: Mapping[str, Any], names: Sequence[str], where: str) -> list[OpSpec]:
    """The OpSpecs a declaration module declares: those bound to `names`, or
    where none are named every one (declared_specs). ValueError, naming
    `where` (the file), where a name is no OpSpec or the file declares none.
    The plugin's collection and `jax-ladder opcheck` both find them here."""
    from .conformance import OpSpec

    if names:
        missing = [n for n in names if not isinstance(namespace.get(n), OpSpec)]
        if missing:
            raise ValueError(f"{where} has no OpSpec named {missing}")
        return [namespace[n] for n in names]
    specs = declared_specs(namespace)
    if not specs:
        raise ValueError(f"{where} declares no OpSpec")
    return specs


class Declarations(pytest.Module):
    """A declaration file: the tests it holds, if any, and each OpSpec's cells."""

    def __init__(self, *, names: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.names = names

    def collect(self) -> Any:
        self.config.stash.setdefault(COLLECTED, set()).add(self.path.resolve())
        try:
            module = vars(self.obj)
        except pytest.skip.Exception:
            raise
        except Exception as error:
            # One failed item, not a stopped session: the suite's own tests run.
            why = str(error) if isinstance(error, self.CollectError) else _user_traceback(error)
            return [Broken.from_parent(self, name="opcheck[import]", why=why)]
        found = list(super().collect())
        try:
            specs = specs_in(module, self.names, self.path.name)
        except ValueError as error:
            return [*found, Broken.from_parent(self, name="opcheck[declaration]", why=str(error))]
        # Each spec's name in the module, for the check() call a failure shows.
        variables = self.names or [next(n for n, v in module.items() if v is s) for s in specs]
        for variable, spec in zip(variables, specs, strict=True):
            found += list(cells_of(self, spec, variable))
        found += list(self.replays(specs, module))
        self.expect_failures(found)
        return found

    def replays(self, specs: list[OpSpec], module: dict[str, Any]) -> Iterator[pytest.Item]:
        """Each recording beside the declaration, through the replay cells."""
        from .conformance import OpSpec
        from .intercept import default_replay_cells, read, recordings_path, replayed
        from .report import select_cells

        path = recordings_path(self.path)
        if not path.is_file():
            return
        every = list({id(v): v for v in module.values() if isinstance(v, OpSpec)}.values())
        counts: dict[str, int] = {}
        for recording in read(path):
            if recording.op is None and len(every) != 1:
                raise self.CollectError(
                    f"{path.name}: recorded for the one OpSpec of {self.path.name}, which "
                    f"declares {len(every)}: name each op in INTERCEPT, and record again"
                )
            names = [s.name for s in every] if recording.op is None else [recording.op]
            for spec in (s for s in specs if s.name in names):
                i = counts[spec.name] = counts.get(spec.name, -1) + 1
                name = f"opcheck[{spec.name}][recorded-{i}]"
                source = f"recorded-{i}, called from {recording.called_from or 'outside a test'}"
                try:
                    replay = replayed(spec, recording)
                except ValueError as error:
                    why = f"{name} ({source}): {error}"
                    yield Broken.from_parent(self, name=name, why=why)
                    continue
                patterns = cell_patterns(self.config, "opcheck_replay_cells")
                try:
                    cells = select_cells(replay, patterns or default_replay_cells(replay))
                except ValueError as error:
                    raise self.CollectError(str(error)) from error
                for cell in cells:
                    for seed in seeds(self.config):
                        yield Cell.from_parent(
                            self,
                            name=item_name(self.config, f"{name}[{cell}]", seed),
                            spec=replay,
                            cell=cell,
                            seed=seed,
                            source=source,
                        )

    def expect_failures(self, items: list[Any]) -> None:
        """The items opcheck_failures.json lists: expected to fail, strictly
        (one that passes fails the run: take it off the list). An entry
        without a seed (`...[eager]`) covers that cell in every seed."""
        if self.config.getoption("opcheck_write_failures"):
            return  # they run unmarked: the run writes what fails
        from .intercept import failures_path, read_failures

        try:
            listed = read_failures(failures_path(self.path))
        except ValueError as error:
            raise self.CollectError(str(error)) from error
        for item in items:
            if not isinstance(item, Cell):
                continue
            reason = listed.get(item.name, listed.get(item.base_name))
            if reason is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


def seeds(config: pytest.Config) -> list[int]:
    """The seeds each cell runs with: --opcheck-seed S and the N-1 after it."""
    first, count = config.getoption("opcheck_seed"), config.getoption("opcheck_seeds")
    if count < 1:
        raise pytest.UsageError(f"--opcheck-seeds must be at least 1, got {count}")
    return list(range(first, first + count))


def item_name(config: pytest.Config, name: str, seed: int) -> str:
    """An item's name: with its seed, where the run takes several."""
    return f"{name}[seed-{seed}]" if config.getoption("opcheck_seeds") > 1 else name


def cells_of(parent: Declarations, spec: OpSpec, variable: str = "SPEC") -> Iterator[pytest.Item]:
    from .report import select_cells

    name = f"opcheck[{spec.name}][refusals]"
    yield Refusals.from_parent(parent, name=name, spec=spec, variable=variable)
    try:
        cells = select_cells(spec, cell_patterns(parent.config))
    except ValueError as error:
        raise parent.CollectError(str(error)) from error
    for cell in cells:
        for seed in seeds(parent.config):
            yield Cell.from_parent(
                parent,
                name=item_name(parent.config, f"opcheck[{spec.name}][{cell}]", seed),
                spec=spec,
                cell=cell,
                seed=seed,
                variable=variable,
            )


class Cell(pytest.Item):
    """One cell: it matches the oracle, or raises the refusal declared for it.
    Its inputs are drawn as check(spec, cells=cell, seed=seed) draws them."""

    def __init__(
        self,
        *,
        spec: OpSpec,
        cell: str = "",
        seed: int = 0,
        variable: str = "SPEC",
        source: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.cell = cell
        self.seed = seed
        self.variable = variable  # the declaration's name for the spec, for check()
        self.source = source  # a replayed recording: which, and the test that made it
        self.base_name = self.name.removesuffix(f"[seed-{seed}]")
        self.shrunk: list[str] = []  # --opcheck-shrink's lines, for a failure

    def runtest(self) -> None:
        from .conformance import run_cell
        from .report import TooFewDevices, cell_environment, seeded_rng

        # The cells this process has run: a failure its repro does not
        # reproduce alone may depend on what they left (shrink.run_alone).
        self.config.stash.setdefault(RAN, []).append(self.name)
        try:
            with cell_environment():
                run_cell(self.spec, self.cell, seeded_rng(self.seed, self.spec.name, self.cell))
        except TooFewDevices as why:
            pytest.skip(str(why))
        except (Exception, pytest.fail.Exception):
            if self.config.getoption("opcheck_shrink") and not self.source:
                self.shrunk = self.shrink()
            raise

    def shrink(self) -> list[str]:
        """--opcheck-shrink: the smallest declaration this cell still fails on,
        and the script that reproduces it (shrink.py)."""
        from .shrink import shrink_lines

        directory = self.config.invocation_params.dir / self.config.getoption("opcheck_repro_dir")
        ran = self.config.stash.get(RAN, [])[:-1]  # this cell's own run is the last
        return shrink_lines(self.spec, self.cell, self.seed, directory, ran)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The error's first line (it names the cell), then the seed and the
        commands that rerun this cell alone; the whole traceback with
        --opcheck-tracebacks or --tb=long."""
        error = excinfo.value
        footer = "\n".join([self.rerun(), *self.shrunk])
        config = self.config
        if config.getoption("opcheck_tracebacks") or config.getoption("tbstyle") == "long":
            shown = super().repr_failure(excinfo, style)
            if footer and hasattr(shown, "addsection"):
                shown.addsection("opcheck", footer)
                return shown
            return "\n".join(filter(None, [str(shown), footer]))
        lines = (str(error) or type(error).__name__).splitlines() or [type(error).__name__]
        if isinstance(self, Broken):
            return "\n".join(lines)  # why it broke, whole (an import error's traceback)
        # As check() words it (report.run_one): "[cell] ...", the error's type
        # where it is not a comparison, and a declared refusal that did not happen.
        first = lines[0].removeprefix(f"[{self.cell}] ")
        if not isinstance(error, AssertionError):
            first = f"{type(error).__name__}: {first}"
        first = f"[{self.cell}] {self.refusal_note(error)}{first}"
        return "\n".join(filter(None, [first, footer]))

    def refusal_note(self, error: BaseException) -> str:
        from .conformance import refusal

        refuse = refusal(self.spec, self.cell)
        if refuse is None or isinstance(error, pytest.fail.Exception):
            return ""  # none declared, or pytest.raises' DID NOT RAISE, which says so
        names = refuse.error if isinstance(refuse.error, tuple) else (refuse.error,)
        said = " or ".join(getattr(e, "__name__", str(e)) for e in names)
        return f"not the declared refusal ({said}): "

    def rerun(self) -> str:
        """The seed, and how to rerun this cell alone: pytest (from the
        run's root) and, for a declared cell, check() and jax-ladder opcheck."""
        config = self.config
        nodeid = f"{self.nodeid.rpartition('::')[0]}::{self.base_name}"
        command = ["python", "-m", "pytest", nodeid]
        for path in config.getoption("opcheck") or []:
            command += ["--opcheck", _from_root(config, config.invocation_params.dir / path)]
        for option in ("opcheck_cells", "opcheck_replay_cells"):
            if config.getoption(option):
                command += [f"--{option.replace('_', '-')}", config.getoption(option)]
        command += ["--opcheck-seed", str(self.seed)]
        lines = [f"seed {self.seed}; rerun this cell alone: {shlex.join(command)}"]
        if self.source:
            lines.insert(0, f"recorded input: {self.source}")
        else:
            call = f"check({self.variable}, cells={self.cell!r}, seed={self.seed})"
            lines.append(f"or, in Python: {call}  # {self.variable} from {self.path.name}")
            target = f"{_from_root(config, self.path)}::{self.variable}"
            cli = ["jax-ladder", "opcheck", target, "--cells", self.cell, "--seed", str(self.seed)]
            lines.append(f"or: {shlex.join(cli)}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def _from_root(config: pytest.Config, path: Path) -> str:
    """path, from the run's root where it lies under it (where the pytest
    command of a failure's rerun runs)."""
    path = Path(os.path.normpath(path))
    root = config.rootpath
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _user_traceback(error: BaseException) -> str:
    """An error raised importing a declaration: its traceback, without
    pytest's and the import system's frames."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not any(part in frame.filename for part in ("_pytest", "pluggy", "<frozen "))
    ]
    shown = "".join(traceback.format_list(frames))
    return f"Traceback:\n{shown}{''.join(traceback.format_exception_only(error))}".rstrip()


class Broken(Cell):
    """A declaration that fails to import or declares no OpSpec, or a
    recording that does not fit it: one failed item, which says why."""

    def __init__(self, *, why: str, **kwargs: Any) -> None:
        super().__init__(spec=cast("OpSpec", None), **kwargs)
        self.why = why

    def runtest(self) -> None:
        raise AssertionError(self.why)

    def rerun(self) -> str:
        return ""


class Refusals(Cell):
    """Every declared refusal names a cell (a typo would refuse nothing)."""

    def runtest(self) -> None:
        from .conformance import unknown_refusals

        unknown = unknown_refusals(self.spec)
        assert not unknown, f"{self.spec.name}: declared refusals name no cell: {unknown}"

    def rerun(self) -> str:
        return ""
