"""Mutation checks: prove that a generated project's tests bite.

Each template keeps `mutations.toml` beside its `cookiecutter.json`: small,
realistic slips (a flipped sign, an off-by-one mask, a narrower accumulator, a
wrong partition spec, a dropped input check), each one textual replacement in
the generated project. For every option combination a mutant applies to, the
kit applies it to a baked project and runs the tests its entry names (never
the whole suite) with `-x`: they must fail. A mutant that survives is a
finding; the only way to keep one is a `survives = "why it is harmless"`
line, which is reported, not run.

Also a script, for whoever writes a template's list:

    python tests/mutation.py templates/<rung> [--set key=value ...] [--only NAME]

bakes that template (from the given folder) and prints each mutant's fate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from forked_pytest import ForkedPytest

# Every category a template's list must cover, unless it says why not.
CATEGORIES = ("values", "gradient", "edge", "sharding", "dtype", "validation")
MIN_MUTANTS = 5  # per template
MIN_PER_COMBINATION = 3  # applicable, non-survivor mutants per option combination
MIN_PER_SKELETON = 1  # example=none: its identity op and its reference disagree
SKELETON = "none"  # the `example` option's value for the skeleton (issue 25)
TIMEOUT_S = 600  # a hung test run counts as killed, but says so
COMPILED_SUFFIXES = {".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".txt"}
# A mutant's rebuild compiles CUDA for one architecture, not the project's
# default list: no GPU runs it here, and nvcc's time is per architecture.
MUTANT_BUILD_CONFIG = ("cmake.define.CMAKE_CUDA_ARCHITECTURES=90",)


@dataclass(frozen=True)
class Mutant:
    name: str
    category: str
    # relative to the generated project; {package} and {op} are the package
    # and op names
    file: str
    original: str
    replacement: str
    breaks: str
    when: dict[str, str] = field(default_factory=dict)
    tests: tuple[str, ...] = ()  # the tests that must kill it (all that run)
    survives: str = ""  # non-empty: a justified survivor, not run
    # non-empty: why the window's oldest JAX cannot kill it (JAX 0.10's XLA:CPU
    # drops optimization barriers, say); it then runs in another combination
    # than the kit's oldest-JAX pass.
    not_on_oldest_jax: str = ""
    # false: its tests compile the changed C++ themselves (ffi's kernel_check
    # driver), so the extension module is not rebuilt for it: a module build
    # would cost a -O3 compile of every file that includes the header, twice
    # (the mutant, then the restored text for the next one), for nothing.
    rebuild_module: bool = True

    def applies_to(self, options: dict[str, str]) -> bool:
        """Whether the mutant's `when` holds; one that does not name `example`
        is a slip in the worked example, absent from the skeleton."""
        if "example" not in self.when and options.get("example") == SKELETON:
            return False
        return all(options.get(key) == value for key, value in self.when.items())

    def path(self, project: Path, package: str, op: str) -> Path:
        return project / self.file.format(package=package, op=op)

    @property
    def compiled(self) -> bool:
        """Whether the change is in code the build compiles (needs a rebuild)."""
        return Path(self.file).suffix in COMPILED_SUFFIXES


@dataclass(frozen=True)
class MutationList:
    mutants: tuple[Mutant, ...]
    not_applicable: dict[str, str]  # category -> why it does not apply
    # "option=value" -> the only own tests the kit's suite runs for a combination
    # with that value (its table says why the rest would repeat another's).
    only_tests: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # "option=value"s the window's oldest JAX cannot run (the project refuses
    # them there), so the kit's oldest-JAX pass picks another combination.
    oldest_jax_avoids: tuple[str, ...] = ()

    def tests_for(self, options: dict[str, str]) -> tuple[str, ...]:
        """The own tests to run for a combination; () means all of them."""
        chosen: list[str] = []
        for key, tests in self.only_tests.items():
            option, _, value = key.partition("=")
            if options.get(option) == value:
                chosen += tests
        return tuple(chosen)


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    killed: bool
    seconds: float
    detail: str  # the first failing test, "timed out", or why it is invalid
    valid: bool = True  # False: the mutant could not be applied or built


def load(template: Path) -> MutationList:
    data = tomllib.loads((template / "mutations.toml").read_text())
    mutants = []
    for entry in data.get("mutant", []):
        entry = dict(entry)
        entry["tests"] = tuple(entry.get("tests", ()))
        mutants.append(Mutant(**entry))
    only = {key: tuple(tests) for key, tests in data.get("only_tests", {}).items()}
    avoids = tuple(data.get("oldest_jax_avoids", ()))
    return MutationList(tuple(mutants), dict(data.get("not_applicable", {})), only, avoids)


def package_of(project: Path) -> str:
    (init,) = project.glob("src/*/__init__.py")
    return init.parent.name


def op_name_of(template: Path, options: dict[str, str]) -> str:
    """The op name a bake with these options has (cookiecutter.json's default
    derives it from `example`)."""
    from jax_ladder.options import load_options, resolve

    return str(resolve(load_options(template), options).get("op_name", ""))


@contextmanager
def applied(project: Path, mutant: Mutant, package: str, op: str) -> Iterator[None]:
    """The project with the mutant applied; the file is restored afterwards."""
    path = mutant.path(project, package, op)
    text = path.read_text()
    count = text.count(mutant.original)
    if count != 1:
        raise ValueError(
            f"mutant {mutant.name!r}: its original text occurs {count} times in "
            f"{path.relative_to(project)} (must be exactly once); update mutations.toml"
        )
    path.write_text(text.replace(mutant.original, mutant.replacement))
    try:
        yield
    finally:
        path.write_text(text)


class Project:
    """A baked project ready to test mutants in place: pure-Python code runs
    from src/; a compiled project is built once and its extension modules are
    copied into src/<package>/, so a Python mutant needs no rebuild and a C++
    mutant rebuilds incrementally (the project's fixed build-dir)."""

    def __init__(self, path: Path, op: str):
        self.path = path
        self.op = op
        self.package = package_of(path)
        self.compiled = (path / "CMakeLists.txt").is_file()
        # The extension modules as first built, put back after each C++ mutant.
        self._pristine: dict[Path, bytes] = {}
        self._runs: ForkedPytest | None = None
        if self.compiled:
            ok, output = self._install_build()
            if not ok:
                raise RuntimeError(f"{path} does not build:\n{_tail(output, 40)}")
            modules = self.package_dir.glob("*.so")
            self._pristine = {module: module.read_bytes() for module in modules}

    @property
    def package_dir(self) -> Path:
        return self.path / "src" / self.package

    def _install_build(self, config: tuple[str, ...] = ()) -> tuple[bool, str]:
        """Build into a scratch folder; copy its extension modules into src/."""
        from jax_ladder.runner import build_project

        with tempfile.TemporaryDirectory() as tmp:
            status, output = build_project(self.path, Path(tmp), config)
            if status != 0:
                return False, output
            for module in (Path(tmp) / self.package).glob("*.so"):
                shutil.copy2(module, self.package_dir / module.name)
        return True, ""

    def restore_build(self) -> None:
        for module, data in self._pristine.items():
            module.write_bytes(data)

    def pytest(self, *args: str) -> tuple[int, str]:
        """`pytest -x ARGS` in a fresh process (forked from a server that has
        imported JAX once: forked_pytest.py)."""
        if self._runs is None:
            # src/ first; what the caller put on the path (the kit's oldest-JAX
            # folder, say) stays behind it.
            path = [str(self.path / "src"), os.environ.get("PYTHONPATH")]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
            self._runs = ForkedPytest(self.path, env)
        return self._runs.run(["-x", "-q", "-p", "no:cacheprovider", *args], TIMEOUT_S)

    def close(self) -> None:
        if self._runs is not None:
            self._runs.close()

    def run_mutant(self, mutant: Mutant) -> Outcome:
        start = time.perf_counter()
        try:
            with applied(self.path, mutant, self.package, self.op):
                if mutant.compiled and self.compiled and mutant.rebuild_module:
                    ok, output = self._install_build(MUTANT_BUILD_CONFIG)
                    if not ok:
                        return Outcome(mutant, False, _since(start), _tail(output), valid=False)
                code, output = self._run_tests(mutant)
        except ValueError as err:
            return Outcome(mutant, False, _since(start), str(err), valid=False)
        finally:
            self.restore_build()
        if code == 5:  # pytest: no tests collected
            return Outcome(mutant, False, _since(start), "its `tests` select nothing", False)
        return Outcome(mutant, code != 0, _since(start), _first_failure(output))

    def _run_tests(self, mutant: Mutant) -> tuple[int, str]:
        """Only the tests the mutant's entry names (a kill costs seconds). The
        project's whole suite is never the fallback: a mutant its named tests
        miss is a finding (name the test that should catch it)."""
        return self.pytest(*mutant.tests)


def _since(start: float) -> float:
    return time.perf_counter() - start


def _tail(output: str, lines: int = 15) -> str:
    return "\n".join(output.splitlines()[-lines:])


def _first_failure(output: str) -> str:
    """The first `FAILED ...`/`ERROR ...` line of a pytest run, else its last line."""
    if output == "timed out":
        return output
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line[:200]
    lines = output.strip().splitlines()
    return lines[-1][:200] if lines else ""


def spread(
    mutations: MutationList,
    combinations: list[dict[str, str]],
    oldest: frozenset[int] = frozenset(),
) -> dict[str, int]:
    """Mutant name -> index of the one combination the kit's suite kills it in.

    Each live mutant runs once, in a combination it applies to: running every
    mutant in every combination it applies to would multiply the suite's time
    by the number of combinations (eight for export) for little more proof.
    The least-loaded combination is taken (the most specific mutants choose
    first), so every combination's tests kill some. `python tests/mutation.py`
    with --set runs all that apply to one combination."""
    load = [0] * len(combinations)
    chosen = {}
    live = [m for m in mutations.mutants if not m.survives]

    # `oldest`: the combination the kit runs under the window's oldest JAX,
    # where a mutant marked `not_on_oldest_jax` is not placed.
    def fits_in(m: Mutant, j: int) -> bool:
        return m.applies_to(combinations[j]) and not (m.not_on_oldest_jax and j in oldest)

    fits = {m.name: [j for j in range(len(combinations)) if fits_in(m, j)] for m in live}
    for mutant in sorted(live, key=lambda m: len(fits[m.name])):
        if fits[mutant.name]:
            best = min(fits[mutant.name], key=lambda j: (load[j], j))
            chosen[mutant.name] = best
            load[best] += 1
    return chosen


def combination_problems(mutations: MutationList, combinations: list[dict[str, str]]) -> list[str]:
    """What a template's list lacks: enough mutants, every category, enough per combination."""
    problems = []
    live = [m for m in mutations.mutants if not m.survives]
    if len(live) < MIN_MUTANTS:
        problems.append(f"{len(live)} mutants that must die; at least {MIN_MUTANTS} needed")
    covered = {m.category for m in live}
    problems += [
        f"no mutant in category {category!r} (nor a reason in not_applicable)"
        for category in CATEGORIES
        if category not in covered and category not in mutations.not_applicable
    ]
    unknown = {m.category for m in mutations.mutants} - set(CATEGORIES)
    problems += [f"unknown category {c!r}" for c in sorted(unknown)]
    names = [m.name for m in mutations.mutants]
    problems += [
        f"duplicate mutant name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    problems += [f"mutant {m.name!r} names no tests to kill it" for m in live if not m.tests]
    for combo in combinations:
        count = sum(m.applies_to(combo) for m in live)
        least = MIN_PER_SKELETON if combo.get("example") == SKELETON else MIN_PER_COMBINATION
        if count < least:
            problems.append(f"{combo}: {count} applicable mutants; at least {least}")
    return problems


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("template", type=Path, help="a template folder, e.g. templates/pallas")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    from cookiecutter.main import cookiecutter

    from jax_ladder.options import load_options

    options = dict(item.split("=", 1) for item in args.set)
    defaults = {k: str(o.default) for k, o in load_options(args.template).items() if o.choices}
    combo = {**defaults, **options}
    mutations = load(args.template)
    with tempfile.TemporaryDirectory() as out:
        path = cookiecutter(
            str(args.template), no_input=True, extra_context=options, output_dir=out
        )
        project = Project(Path(path), op_name_of(args.template, combo))
        chosen = [m for m in mutations.mutants if m.applies_to(combo) and not m.survives]
        chosen = [m for m in chosen if not args.only or m.name in args.only]
        killed = 0
        for mutant in chosen:
            outcome = project.run_mutant(mutant)
            killed += outcome.killed
            fate = "killed" if outcome.killed else ("INVALID" if not outcome.valid else "SURVIVED")
            print(f"{fate:<9} {outcome.seconds:6.1f}s  {mutant.name}: {outcome.detail}", flush=True)
        project.close()
    print(f"{killed}/{len(chosen)} killed for {combo}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(_main())
