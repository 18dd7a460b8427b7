#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["nox>=2025.2.9"]
# ///
"""Development tasks, each in its own fresh environment.

    nox                 # the default sessions: tests, lint, typecheck
    nox -s tests -- -x  # one session; arguments after -- go to its tool
    nox -l              # list the sessions
    nox -s tests-jax-0.10  # the tests under each JAX the project supports

(`pipx run nox ...` or `uv run noxfile.py ...` work without installing nox.)
"""

import shutil
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.version import Version

# 2025.2.9: the first nox with nox.project.dependency_groups.
nox.needs_version = ">=2025.2.9"
# uv builds the environments when it is installed (much faster); else virtualenv.
nox.options.default_venv_backend = "uv|virtualenv"

# Requirements come from pyproject.toml's [dependency-groups], so that nox, CI
# and `pip install --group` install the same things.
PYPROJECT = nox.project.load_toml("pyproject.toml")


@nox.session
def tests(session: nox.Session) -> None:
    """The tests, against the project as installed (built, for compiled code)."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("pytest", *session.posargs)


def jax_minors() -> list[str]:
    """The JAX minor releases pyproject.toml's pin admits (">=0.10,<0.13": 0.10,
    0.11 and 0.12), so the window has one home in this project: the pin."""
    requirements = map(Requirement, PYPROJECT["project"]["dependencies"])
    (pin,) = (r for r in requirements if r.name == "jax")
    bound = {s.operator: Version(s.version) for s in pin.specifier}
    low, high = bound[">="], bound["<"]
    return [f"{low.major}.{minor}" for minor in range(low.minor, high.minor)]


def tests_under_jax(minor: str):
    def session(session: nox.Session) -> None:
        # A constraints file holds JAX at this minor for the install, not for
        # the build: a compiled extension builds, as for any user, against the
        # jax of build-system.requires (the oldest supported: an FFI handler
        # loads in that jaxlib and newer ones, never in older ones), and is
        # tested here under this minor's.
        # (-c, not PIP_CONSTRAINT: the build environment's own pip would
        # inherit the variable.)
        constraints = Path(session.create_tmp()) / "jax-constraints.txt"
        constraints.write_text(f"jax=={minor}.*\njaxlib=={minor}.*\n")
        test = nox.project.dependency_groups(PYPROJECT, "test")
        session.install("-c", str(constraints.resolve()), ".", *test)
        session.run("python", "-c", "import jax; print('JAX', jax.__version__)")
        session.run("pytest", *session.posargs)

    session.__doc__ = f"The tests under the newest JAX {minor}.x (nox -s tests-jax-{minor})."
    return session


for _minor in jax_minors():
    nox.session(name=f"tests-jax-{_minor}", default=False)(tests_under_jax(_minor))


@nox.session
def lint(session: nox.Session) -> None:
    """Every pre-commit hook on every file."""
    session.install("pre-commit")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure", *session.posargs)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy on src/ (pyproject.toml's [tool.mypy]), with the project's dependencies."""
    session.install(".", "mypy")
    session.run("mypy", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """The benchmark's quick smoke run (the full run: python benchmarks/bench.py;
    add --plot FILE.svg to draw it), with the test dependencies: the op's
    declaration in tests/op_spec.py needs them, and they bring matplotlib."""
    session.install(".", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("python", "benchmarks/bench.py", "--quick", *session.posargs)


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """Build the documentation; any Sphinx warning is an error. docs/conf.py
    imports the package from src/, so only its dependencies are installed (a
    compiled extension is not built for the docs)."""
    dependencies = PYPROJECT["project"]["dependencies"]
    session.install(*dependencies, *nox.project.dependency_groups(PYPROJECT, "docs"))
    args = ["-W", "--keep-going", "-b", "html", "docs", "docs/_build/html"]
    session.run("sphinx-build", *args, *session.posargs)


@nox.session(default=False)
def build(session: nox.Session) -> None:
    """Build the sdist and wheel into dist/ and check them as PyPI would."""
    shutil.rmtree("dist", ignore_errors=True)
    session.install("build", "twine", "check-wheel-contents")
    session.run("python", "-m", "build")
    session.run("twine", "check", "--strict", *map(str, Path("dist").iterdir()))
    session.run("check-wheel-contents", *map(str, Path("dist").glob("*.whl")))


if __name__ == "__main__":
    nox.main()
