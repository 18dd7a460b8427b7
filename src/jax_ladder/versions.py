"""The JAX versions the kit supports: the one definition.

The window is the last three minor releases of JAX. Each template's
cookiecutter.json passes JAX_SPEC on as the private variable `_jax_spec`, which
its pyproject.toml pins (and its noxfile reads, for a `tests-jax-<minor>`
session per minor). tests/test_versions.py holds that and every other copy to
these values: the kit's pyproject.toml, scripts/_env.sh, the templates' CI
matrices (the oldest), the README and reference pages.
"""

# The newest patch of each minor release the kit's tests ran on, oldest first.
# Widen only after the kit's tests pass on the new version (the scheduled
# newest-JAX workflow tests past the pin); then drop the oldest. One line.
JAX_WINDOW = ("0.10.2", "0.11.2", "0.12.0.1")


def _minor(version: str) -> tuple[int, int]:
    major, minor, *_ = version.split(".")
    return int(major), int(minor)


_OLDEST, _NEWEST = _minor(JAX_WINDOW[0]), _minor(JAX_WINDOW[-1])
# ">=0.10,<0.13": every release of the window's minors, patches included.
JAX_SPEC = f">={_OLDEST[0]}.{_OLDEST[1]},<{_NEWEST[0]}.{_NEWEST[1] + 1}"
# The versions the kit's tests and the measurements in the docs ran on.
JAX_TESTED = JAX_WINDOW[-1]
JAX_OLDEST = JAX_WINDOW[0]

# What each kit release supported, for a user whose JAX is outside the window:
# `jax-ladder new` names the newest release that supported their JAX.
RELEASE_WINDOWS = {
    "0.1.0": ">=0.12,<0.13",
    "0.2.0": ">=0.12,<0.13",
    "0.3.0": JAX_SPEC,
}
