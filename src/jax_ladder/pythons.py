"""Which Python to make a generated project's virtual environment with.

`jax-ladder new` prints the command; the machine's default `python` may be
older than the project allows (a pyenv default of 3.11, say).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

MINORS = range(10, 21)  # the 3.X versions worth asking for


def requires_python(project: Path) -> SpecifierSet:
    """The project's `requires-python`, from its pyproject.toml."""
    with (project / "pyproject.toml").open("rb") as file:
        return SpecifierSet(tomllib.load(file)["project"]["requires-python"])


def jax_requirement(project: Path) -> SpecifierSet:
    """The versions of JAX the project's dependencies admit."""
    with (project / "pyproject.toml").open("rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    (jax,) = (r for r in map(Requirement, dependencies) if r.name == "jax")
    return jax.specifier


def find_python(needs: SpecifierSet) -> str | None:
    """A command that runs a Python `needs` allows: a name on the PATH where one
    fits, else the full path of a pyenv-installed version; None if neither.

    Each candidate is run, not judged by its name: pyenv puts a shim on the PATH
    for every installed version, which fails unless that version is selected.
    """
    for command in _candidates(needs):
        version = _version_of(command)
        if version is not None and needs.contains(version):
            return command
    return None


def oldest_allowed(needs: SpecifierSet) -> str:
    """The oldest 3.X that `needs` allows, to name in a message ("3" if none)."""
    return next((f"3.{minor}" for minor in MINORS if _allows(needs, minor)), "3")


def _allows(needs: SpecifierSet, minor: int) -> bool:
    """Whether `needs` allows some 3.<minor>.* release (">=3.12.2" allows 3.12)."""
    return any(needs.contains(f"3.{minor}.{patch}") for patch in (0, 99))


def _candidates(needs: SpecifierSet) -> Iterator[str]:
    """The commands worth running, in order: the plain names, then the versioned
    names `needs` allows, oldest first (the oldest that fits has the most wheels
    for the project's dependencies), then pyenv's installed versions."""
    allowed = [minor for minor in MINORS if _allows(needs, minor)]
    for name in ("python3", "python", *(f"python3.{minor}" for minor in allowed)):
        if shutil.which(name):
            yield name
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    installed = []
    for python in root.glob("versions/3.*/bin/python3"):
        try:
            version = Version(python.parts[-3])
        except InvalidVersion:  # a virtualenv's or a dev build's folder
            continue
        if needs.contains(version):
            installed.append((version, str(python)))
    yield from (path for _, path in sorted(installed))


def version_of(command: str) -> str | None:
    """The Python version `command` runs ("3.12.4"), None if it does not run."""
    return _version_of(command)


def _version_of(command: str) -> str | None:
    try:
        probe = subprocess.run(
            [command, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return probe.stdout.strip() or None if probe.returncode == 0 else None
