"""Run a generated project's tests in the current environment and summarise them."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Printed by every generated project's tests/conftest.py at the end of a run.
ORACLE_LINE = re.compile(r"oracle: worst error (\S+) \((\S+)% of tolerance\)")


@dataclass
class TestRun:
    passed: int
    failed: int
    skipped: int
    worst_error: float | None  # largest |extension - oracle| seen, None if unreported
    worst_fraction: float | None  # that error as a percentage of its tolerance
    seconds: float
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.failed == 0 and self.passed > 0


def needs_build(project: Path) -> bool:
    """Whether the project compiles an extension (the FFI rung): CMake builds it."""
    return (project / "CMakeLists.txt").is_file()


# What build_project's non-isolated build imports from this environment
# (module -> distribution, version), besides jax: the ffi template's
# build-system.requires. Build tools, not the kit's runtime dependencies (a
# project's own `pip install .` gets them by build isolation), so the kit
# declares them as its `ffi` extra (tests/test_packaging.py holds the two equal).
BUILD_TOOLS = {
    "scikit_build_core": ("scikit-build-core", ">=0.11"),
    "nanobind": ("nanobind", ">=2.4"),
}


def install_build_tools(names: list[str]) -> str:
    """The command that installs these BUILD_TOOLS distributions. Named with their
    versions, not as `jax-ladder[ffi]`: a requirement pip may look up on the
    package index, where the kit has no release yet."""
    specs = dict(BUILD_TOOLS.values())
    return "pip install " + " ".join(f"'{name}{specs[name]}'" for name in names)


def missing_build_tools() -> list[str]:
    """The distributions of BUILD_TOOLS that this Python cannot import."""
    return [
        name for module, (name, _) in BUILD_TOOLS.items() if not importlib.util.find_spec(module)
    ]


def build_project(
    project: Path, target: Path, config: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Build and install the project into the folder `target`, not into the environment.

    The project's own build backend (scikit-build-core) runs without build
    isolation, so it uses this environment's jax, nanobind and
    scikit-build-core; `--target` keeps the environment itself unchanged.
    `config` holds extra `-C key=value` settings; `env` replaces os.environ
    for the build. Returns (status, output); where a build tool is missing,
    the output is one line naming what to install, not pip's traceback.
    """
    missing = missing_build_tools()
    if missing:
        return 1, (
            f"building {project.name} needs {' and '.join(missing)} in this environment (it "
            f"builds without isolation, with this Python's packages): "
            f"{install_build_tools(missing)}"
        )
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps"]
    cmd += ["--disable-pip-version-check", "--target", str(target), str(project)]
    cmd += [f"-C{setting}" for setting in config]
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return proc.returncode, proc.stdout


# About 45 lines, a third of them the docstring: the steps it runs are each
# one helper below.
def run_project_tests(
    project: Path,
    echo: Callable[[str], None] | None = None,
    extra_args: tuple[str, ...] = (),
    build_config: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    code: Path | None = None,
) -> TestRun:
    """pytest the project in the current environment, without installing it there.

    Pure-Python projects run with their src/ on the path. A project with
    compiled code is first built into a temporary folder (`build_config`:
    extra scikit-build-core `-C` settings) that goes on the path instead;
    `code` names an already built folder to use instead of building.
    Before testing, the runner checks that every module of the package
    imports from that folder (an editable install of a same-named project
    would otherwise win through its import hook) and refuses if not.
    `echo(line)` is called with each output line as it arrives; `env`
    replaces os.environ for the test process.
    """
    env = dict(os.environ if env is None else env)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if code is None:
            code, status, output = _code_to_test(project, Path(tmp), build_config, echo)
            if status != 0:
                return _not_run(status, output, start)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
        problem = shadowing_problem(project, code, env)
        if problem:
            return _not_run(1, problem, start)
        junit = Path(tmp) / "junit.xml"
        returncode, output = _stream_pytest(project, env, junit, extra_args, echo)
        counts, _ = junit_results(junit)
    match = ORACLE_LINE.search(output)
    return TestRun(
        passed=counts["passed"],
        failed=counts["failed"],
        skipped=counts["skipped"],
        worst_error=float(match.group(1)) if match else None,
        worst_fraction=float(match.group(2)) if match else None,
        seconds=time.perf_counter() - start,
        returncode=returncode,
        output=output,
    )


def _not_run(status: int, output: str, start: float) -> TestRun:
    return TestRun(0, 0, 0, None, None, time.perf_counter() - start, status, output)


def _code_to_test(
    project: Path,
    tmp: Path,
    build_config: tuple[str, ...],
    echo: Callable[[str], None] | None,
) -> tuple[Path, int, str]:
    """(folder to put on PYTHONPATH, build status, build output)."""
    if not needs_build(project):
        return project / "src", 0, ""
    site = tmp / "site"
    status, output = build_project(project, site, build_config)
    if echo:
        for line in output.splitlines():
            echo(line)
    return site, status, output


def _stream_pytest(
    project: Path,
    env: dict[str, str],
    junit: Path,
    extra_args: tuple[str, ...],
    echo: Callable[[str], None] | None,
) -> tuple[int, str]:
    """Run pytest in the project, echoing its output as it comes; (status, output)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    proc = subprocess.Popen(
        [*cmd, *extra_args],
        cwd=project,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if echo:
            echo(line.rstrip("\n"))
    return proc.wait(), "".join(lines)


# Run in the test process's environment: where would each module of the
# package be imported from? Prints one "name origin" line per module. An
# import hook that fails (an editable install whose folder was deleted raises
# FileNotFoundError) is named as the origin instead of a traceback.
_WHERE_FROM = """
import importlib.util, pkgutil, sys
name = sys.argv[1]
def where(module):
    try:
        spec = importlib.util.find_spec(module)
    except Exception as err:
        failure = f"{type(err).__name__}: {err}"
        for finder in sys.meta_path:
            try:
                finder.find_spec(module, None)
            except Exception:
                hook = sys.modules.get(type(finder).__module__)
                hook = getattr(hook, "__file__", hook)
                return None, f"an import hook ({hook}) failing: {failure}"
        return None, f"nowhere ({failure})"
    return spec, spec.origin if spec else None
spec, origin = where(name)
print(name, origin)
for info in pkgutil.iter_modules(spec.submodule_search_locations or []) if spec else ():
    print(f"{name}.{info.name}", where(f"{name}.{info.name}")[1])
"""


def shadowing_problem(project: Path, code: Path, env: dict[str, str]) -> str | None:
    """Why the tests would not import the code under test, or None if they would.

    Import hooks (scikit-build-core's editable installs put one first on
    sys.meta_path) beat PYTHONPATH, so a same-named project installed in the
    environment would be tested instead of the one just built.
    """
    package = next(project.glob("src/*/__init__.py")).parent.name
    where = subprocess.run(
        [sys.executable, "-c", _WHERE_FROM, package],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    if where.returncode != 0:
        return f"could not locate package {package!r} for testing:\n{where.stderr[-2000:]}"
    root = code.resolve()
    foreign = []
    for line in where.stdout.splitlines():
        name, origin = line.split(" ", 1)
        if origin == "None" or root not in Path(origin).resolve().parents:
            foreign.append(f"{name} from {origin}")
    if not foreign:
        return None
    return (
        f"refusing to test {project}: this environment already has a package named "
        f"{package!r} installed, and its import hook wins over the code just built, so the "
        f"tests would run against the installed copy ({'; '.join(foreign[:3])}). "
        f"Uninstall that copy (for instance python -m pip uninstall {project.name}) or run "
        "in another environment."
    )


# A module that skips itself while pytest collects it (pytest.skip(allow_module_level=True))
# is one JUnit testcase whose message is only this; its reason is in the element's text,
# "('path/test_x.py', 16, 'Skipped: the reason')".
COLLECTION_SKIP = "collection skipped"
COLLECTION_SKIP_REASON = re.compile(r"""Skipped: (.*)['"]\)\s*$""", re.S)


def skip_reason(skip: ET.Element) -> str:
    """A JUnit <skipped> element's reason: its message, or a collection skip's own reason."""
    message = skip.get("message", "")
    if message == COLLECTION_SKIP and (found := COLLECTION_SKIP_REASON.search(skip.text or "")):
        return found[1]
    return message


def junit_results(junit: Path) -> tuple[dict[str, int], list[str]]:
    """From a pytest JUnit XML file: the passed, failed and skipped counts, and
    "test: reason" for each skip. Zeros and no reasons if pytest never wrote it."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not junit.exists():
        return counts, []
    root = ET.parse(junit).getroot()
    reasons = [
        f"{case.get('name')}: {skip_reason(skip)}"
        for case in root.iter("testcase")
        if (skip := case.find("skipped")) is not None
    ]
    for suite in root.iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts["failed"] += failed
        counts["skipped"] += skipped
        counts["passed"] += tests - failed - skipped
    return counts, reasons
