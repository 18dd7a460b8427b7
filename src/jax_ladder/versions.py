"""The JAX versions the kit supports: the one definition.

The window is the last three minor releases of JAX. Each template's
cookiecutter.json passes JAX_SPEC on as the private variable `_jax_spec`, which
its pyproject.toml pins (and its noxfile reads, for a `tests-jax-<minor>`
session per minor); a template with compiled code also gets JAX_OLDEST as
`_jax_oldest`, its exact build requirement (an FFI handler built against a
jaxlib's headers loads in that jaxlib and newer ones, never in older ones).
tests/test_versions.py holds that and every other copy to
these values: the kit's pyproject.toml, scripts/_env.sh, the templates' CI
matrices (the oldest), the README, docs/versions.md and reference pages; and PYTHON_OLDEST to
every requires-python, classifier, type checker's and CMake's Python version.
"""

from packaging.specifiers import SpecifierSet
from packaging.version import Version

# The newest patch of each minor release the kit's tests ran on, oldest first.
# Widen only after the kit's tests pass on the new version (the scheduled
# newest-JAX workflow tests past the pin); then drop the oldest. One line.
JAX_WINDOW = ("0.10.2", "0.11.2", "0.12.1")


def _minor(version: str) -> tuple[int, int]:
    major, minor, *_ = version.split(".")
    return int(major), int(minor)


_OLDEST, _NEWEST = _minor(JAX_WINDOW[0]), _minor(JAX_WINDOW[-1])
# ">=0.10,<0.13": every release of the window's minors, patches included.
_BEYOND = f"{_NEWEST[0]}.{_NEWEST[1] + 1}"  # the first minor the window excludes
JAX_SPEC = f">={_OLDEST[0]}.{_OLDEST[1]},<{_BEYOND}"
# The versions the kit's tests and the measurements in the docs ran on.
JAX_TESTED = JAX_WINDOW[-1]
JAX_OLDEST = JAX_WINDOW[0]

# The oldest Python the kit and every template support ("3.X"): the oldest
# that the window's oldest JAX publishes wheels for. Newer minors of the window
# may need a newer Python (JAX 0.11 and 0.12 have no wheels for 3.11), so on
# this Python pip resolves a project's jax pin to the oldest minor's newest
# patch (JAX 0.10.x). Move it up when the window drops the JAX that held it.
PYTHON_OLDEST = "3.11"
# The JAX a project gets there ("0.10.x"), as the READMEs say.
JAX_ON_PYTHON_OLDEST = f"{_OLDEST[0]}.{_OLDEST[1]}.x"
# The JAX a project gets on a newer Python ("0.12.x", the window's newest
# minor): what `jax-ladder new` says the Python it names gets.
JAX_NEWEST_MINOR = f"{_NEWEST[0]}.{_NEWEST[1]}.x"

# The internals template's api=hijax defines its primitive as a
# jax.experimental.hijax.HiPrim, which JAX 0.11 introduced (0.10 has an earlier
# API): its projects pin this floor, with the window's upper bound, so pip
# refuses JAX 0.10 instead of installing a project that cannot import.
HIJAX_JAX_OLDEST = "0.11"
HIJAX_JAX_SPEC = f">={HIJAX_JAX_OLDEST},<{_BEYOND}"
# The oldest Python that JAX HIJAX_JAX_OLDEST publishes wheels for: what
# `jax-ladder new` tells a hijax project's user to make its environment with.
HIJAX_PYTHON_OLDEST = "3.12"

# What each kit release supported, for a user whose JAX is outside the window:
# `jax-ladder new` names the newest release that supported their JAX.
RELEASE_WINDOWS = {
    "0.1.0": ">=0.12,<0.13",
    "0.2.0": ">=0.12,<0.13",
    "0.3.0": ">=0.10,<0.13",
    "0.4.0": ">=0.10,<0.13",
    "0.5.0": ">=0.10,<0.13",
    "0.5.1": ">=0.10,<0.13",
    "0.6.0": ">=0.10,<0.13",
    "0.7.0": ">=0.10,<0.13",
    "0.8.0": ">=0.10,<0.13",
    "0.9.0": ">=0.10,<0.13",
    "0.10.0": ">=0.10,<0.13",
    "0.11.0": ">=0.10,<0.13",
    "0.12.0": ">=0.10,<0.13",
    "0.12.1": ">=0.10,<0.13",
    "0.13.0": ">=0.10,<0.13",
    "0.14.0": ">=0.10,<0.13",
    "0.15.0": ">=0.10,<0.13",
    "0.16.0": ">=0.10,<0.13",
}


def _lower_bound(spec: str) -> Version:
    return min(Version(s.version) for s in SpecifierSet(spec) if s.operator == ">=")


def release_for(jax_version: str) -> str | None:
    """The newest kit release whose window held `jax_version`, or None."""
    held = [r for r, spec in RELEASE_WINDOWS.items() if Version(jax_version) in SpecifierSet(spec)]
    return max(held, key=Version, default=None)


def outside_window(jax_version: str) -> str | None:
    """What to tell a user whose installed JAX is outside the window, or None
    when it is inside."""
    version = Version(jax_version)
    if version in SpecifierSet(JAX_SPEC):
        return None
    if version > Version(JAX_WINDOW[-1]):
        return (
            f"JAX {jax_version} is installed here, newer than this kit has tested "
            f"(jax{JAX_SPEC}); the project pins that range, so its own environment "
            "installs a supported JAX."
        )
    release = release_for(jax_version)
    advice = (
        f"jax-ladder {release} supported it: pip install 'jax-ladder=={release}'"
        if release
        else f"no jax-ladder release supported it (the oldest JAX any supported is "
        f"{min(_lower_bound(spec) for spec in RELEASE_WINDOWS.values())}): upgrade JAX"
    )
    return (
        f"JAX {jax_version} is installed here, older than this kit supports "
        f"(jax{JAX_SPEC}, the last three minor releases); {advice}."
    )
