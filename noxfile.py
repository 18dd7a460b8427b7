"""Contributor sessions (`pipx install nox`, then `nox -l` to list them).

A new user starts with the README's two commands (`./scripts/demo`,
`./scripts/test`); these sessions are for working on the kit:

    nox -s tests -- -k pallas            # the kit's suite (args go to pytest)
    nox -s lint                          # pre-commit on every file
    nox -s typecheck                     # mypy --strict on src/jax_ladder
    nox -s demo                          # jax-ladder demo
    nox -s bake -- pallas --set backend=triton   # one rung, its own tests
    nox -s mutants -- templates/pallas --set backend=triton
    nox -s pages                         # the reference pages' checks
    nox -s readme                        # refresh the sample outputs (README, docs/using.md)
    nox -s docs                          # the kit's site, into docs/_build/html
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "typecheck", "tests"]

PYTHON = "3.12"
ROOT = Path(__file__).parent
# The build requirements first: the kit builds without isolation, so that the
# sessions that run its tests can switch on its compiled FFI examples, which
# compile against this environment's jax and nanobind (CMakeLists.txt; a plain
# `pip install .` compiles nothing).
BUILD_REQUIRES = ("scikit-build-core>=0.11", "nanobind>=2.4")
FFI_EXAMPLES_ON = ("-Ccmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=ON", "-Cwheel.platlib=true")


def _install_kit(session: nox.Session, *extras: str, ffi_examples: bool = False) -> None:
    jax_spec = _jax_spec()
    session.install(*BUILD_REQUIRES, f"jax{jax_spec}")
    target = f".[{','.join(extras)}]" if extras else "."
    session.install("--no-build-isolation", target, *(FFI_EXAMPLES_ON if ffi_examples else ()))


def _jax_spec() -> str:
    """The supported JAX range, from its one definition in the package."""
    namespace: dict[str, object] = {}
    exec((ROOT / "src/jax_ladder/versions.py").read_text(), namespace)
    return str(namespace["JAX_SPEC"])


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The kit's whole suite, as ./scripts/test runs it (the compiled FFI examples on)."""
    _install_kit(session, "test", ffi_examples=True)
    session.run("pytest", *session.posargs)


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """pre-commit (ruff, typos, file hygiene) on every file."""
    session.run("pre-commit", "run", "--all-files", *session.posargs, external=True)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the kit's package (configured in pyproject.toml)."""
    _install_kit(session, "test")
    session.install("mypy>=1.11")
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Scaffold every rung with defaults and run each project's tests."""
    _install_kit(session)
    session.run("jax-ladder", "demo", *session.posargs)


@nox.session(python=PYTHON)
def bake(session: nox.Session) -> None:
    """`nox -s bake -- RUNG [--set KEY=VALUE ...]`: scaffold one rung into a
    temporary folder and run its tests against this checkout's templates."""
    if not session.posargs:
        session.error("usage: nox -s bake -- RUNG [--set KEY=VALUE ...]")
    _install_kit(session)
    rung, *options = session.posargs
    out = tempfile.mkdtemp(prefix="jax-ladder-bake-")
    session.run("jax-ladder", "new", rung, "--no-input", "--output-dir", out, *options)
    (project,) = Path(out).iterdir()
    session.run("python", "-c", _RUN_TESTS, str(project))
    session.log(f"baked into {project}")


# The kit's runner: builds a compiled project into a temporary folder, checks
# that the tests import what it built, and runs them.
_RUN_TESTS = """
import sys
from pathlib import Path
from jax_ladder.runner import run_project_tests
run = run_project_tests(Path(sys.argv[1]), echo=print)
sys.exit(0 if run.ok else 1)
"""


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """`nox -s mutants -- templates/RUNG [--set KEY=VALUE]`: a template's mutation list."""
    _install_kit(session, "test")
    session.run("python", "tests/mutation.py", *session.posargs)


@nox.session(python=PYTHON)
def pages(session: nox.Session) -> None:
    """The reference pages (docs/rungs): every jax name they mention exists."""
    _install_kit(session, "test")
    session.run("pytest", "-n", "0", "tests/test_reference_pages.py", *session.posargs)


@nox.session(python=PYTHON)
def readme(session: nox.Session) -> None:
    """Rerun the commands whose output the README quotes, and rewrite those blocks
    (`-- --only list` for one; tests/test_readme_samples.py checks they are current)."""
    _install_kit(session)
    session.run("python", "scripts/readme-samples", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the kit's site into docs/_build/html; any Sphinx warning is an error.
    docs/conf.py reads this checkout's src/, so the kit is not built: its
    dependencies and the docs extra are enough."""
    project = nox.project.load_toml(ROOT / "pyproject.toml")["project"]
    session.install(*project["dependencies"], *project["optional-dependencies"]["docs"])
    args = ["-W", "--keep-going", "-b", "html", "docs", "docs/_build/html"]
    session.run("sphinx-build", *args, *session.posargs)
