"""Run a generated project's tests in the current environment and summarise them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
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


def build_project(project: Path, target: Path, config: tuple[str, ...] = ()) -> tuple[int, str]:
    """Build and install the project into the folder `target`, not into the environment.

    The project's own build backend (scikit-build-core) runs without build
    isolation, so it uses this environment's jax, nanobind and
    scikit-build-core; `--target` keeps the environment itself unchanged.
    `config` holds extra `-C key=value` settings. Returns (status, output).
    """
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps"]
    cmd += ["--disable-pip-version-check", "--target", str(target), str(project)]
    cmd += [f"-C{setting}" for setting in config]
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc.returncode, proc.stdout


def run_project_tests(
    project: Path,
    echo=None,
    extra_args: tuple[str, ...] = (),
    build_config: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> TestRun:
    """pytest the project in the current environment, without installing it there.

    Pure-Python projects run with their src/ on the path. A project with
    compiled code is first built into a temporary folder (`build_config`:
    extra scikit-build-core `-C` settings) that goes on the path instead.
    `echo(line)` is called with each output line as it arrives; `env`
    replaces os.environ for the test process.
    """
    env = dict(os.environ if env is None else env)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        code = project / "src"
        if needs_build(project):
            code = Path(tmp) / "site"
            status, output = build_project(project, code, build_config)
            if echo:
                for line in output.splitlines():
                    echo(line)
            if status != 0:
                return TestRun(0, 0, 0, None, None, time.perf_counter() - start, status, output)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
        junit = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *extra_args,
        ]
        proc = subprocess.Popen(
            cmd, cwd=project, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if echo:
                echo(line.rstrip("\n"))
        returncode = proc.wait()
        seconds = time.perf_counter() - start
        counts = _junit_counts(junit)
    output = "".join(lines)
    match = ORACLE_LINE.search(output)
    return TestRun(
        passed=counts["passed"],
        failed=counts["failed"],
        skipped=counts["skipped"],
        worst_error=float(match.group(1)) if match else None,
        worst_fraction=float(match.group(2)) if match else None,
        seconds=seconds,
        returncode=returncode,
        output=output,
    )


def _junit_counts(junit: Path) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not junit.exists():
        return counts
    root = ET.parse(junit).getroot()
    for suite in root.iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts["failed"] += failed
        counts["skipped"] += skipped
        counts["passed"] += tests - failed - skipped
    return counts
