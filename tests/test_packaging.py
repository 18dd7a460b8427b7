"""What the kit ships: a licence in the wheel and sdist, an sdist that holds
the templates but nothing from a local environment or build, runtime
dependencies that are exactly what the kit imports (build tools in an extra),
and a default install that compiles nothing (a pure wheel; the compiled FFI
examples are the tests' opt-in, CMakeLists.txt), from which a new user's op,
declared in an empty folder, passes `jax-ladder opcheck` and the pytest plugin
(issue 60)."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import venv
from importlib import metadata
from pathlib import Path

import pytest
from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from jax_ladder import runner


def test_installed_kit_declares_and_carries_its_licence():
    meta = metadata.metadata("jax-ladder")
    assert meta["License-Expression"] == "Apache-2.0"
    files = [str(f) for f in metadata.files("jax-ladder") or []]
    assert any(f.endswith("licenses/LICENSE") for f in files), files[:20]


def test_sdist_has_the_licence_and_templates_and_no_local_environment(tmp_path):
    build = "import sys; from scikit_build_core.build import build_sdist; build_sdist(sys.argv[1])"
    result = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    assert "LICENSE" in names
    assert any(n.startswith("templates/ffi/") for n in names)
    assert any(n.startswith("examples/ffi/csrc/") for n in names)
    leaked = [n for n in names if n.startswith((".venv", "build/")) or "/.venv/" in n]
    assert leaked == [], leaked[:10]


PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SRC = REPO / "src"
# Runtime needs that no module of the kit imports, each with where it is used.
NOT_IMPORTED = {
    # jax.export's serialize() imports flatbuffers, and jax does not depend on it.
    "flatbuffers": ("jax_ladder/opcheck/conformance/cells_export.py", ".serialize()"),
}
# Modules the kit's code imports that are not packages to install, and why.
NOT_DISTRIBUTIONS = {
    # support_table.main runs in a generated project's tests/ folder (it puts
    # that folder on sys.path first), where op_spec.py is the project's own.
    "op_spec": "jax_ladder/opcheck/support_table.py",
}


def requirement_names(requirements):
    return {canonicalize_name(Requirement(text).name) for text in requirements}


def module_file(module):
    """The kit's source file of `module` (a jax_ladder module), or None."""
    path = SRC.joinpath(*module.split("."))
    return next((f for f in (path.with_suffix(".py"), path / "__init__.py") if f.is_file()), None)


def imports_of(module):
    """Every module name an import statement in `module` names, function-level
    ones (the plugin's lazy JAX) included, relative ones made absolute; for
    `from package import name`, package.name too (it may be a submodule)."""
    path = module_file(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def kit_runtime_imports():
    """The top-level modules outside the standard library that the kit imports
    when it runs: the modules reachable by import from its entry points (the
    `jax-ladder` command, the pytest plugin) and from `jax_ladder.opcheck`, the
    public call (whose lazy exports are named in its TYPE_CHECKING block). The
    files copied into projects and not imported by the kit (project_files/, the
    engine's plot.py) are not reached, so their imports do not count."""
    roots = [script.split(":")[0] for script in PYPROJECT["project"]["scripts"].values()]
    for group in PYPROJECT["project"]["entry-points"].values():
        roots += [target.split(":")[0] for target in group.values()]
    roots += ["jax_ladder", "jax_ladder.__main__", "jax_ladder.opcheck"]
    seen, todo, outside = set(), list(roots), {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in imports_of(module):
            top = name.split(".")[0]
            if top == "jax_ladder":
                if module_file(name) is not None:
                    todo.append(name)
            elif top not in sys.stdlib_module_names and top != "__future__":
                outside.setdefault(top, module)
    assert "jax_ladder.opcheck.plugin" in seen, seen
    assert "jax_ladder.commands.demo" in seen, seen
    assert "jax_ladder.opcheck.plot" not in seen  # a project's benchmark module
    return outside


def test_runtime_dependencies_are_what_the_kit_imports():
    """pyproject's dependencies are what a library that adds the kit (say, to
    its test extra) gets, so they are exactly what `jax-ladder` and
    `jax_ladder.opcheck` import, plus the NOT_IMPORTED needs: no build tool of
    the generated projects (nanobind, scikit-build-core build the ffi project in
    its own isolated environment; the demo's in-place build asks for the `ffi`
    extra)."""
    declared = requirement_names(PYPROJECT["project"]["dependencies"])
    distributions = metadata.packages_distributions()
    imported, unknown = set(), []
    for top, where in kit_runtime_imports().items():
        if top in NOT_DISTRIBUTIONS:
            assert NOT_DISTRIBUTIONS[top] == where.replace(".", "/") + ".py", (top, where)
        elif top in distributions:
            imported |= {canonicalize_name(d) for d in distributions[top]}
        else:
            unknown.append(f"{top} (imported by {where})")
    assert unknown == [], f"imported, but from no installed distribution: {unknown}"
    # jaxlib installs the `jaxlib` module, never imported by name: jax requires it.
    imported -= {"jaxlib"}
    for name, (path, use) in NOT_IMPORTED.items():
        assert use in (SRC / path).read_text(), f"{name}: {path} no longer uses {use}"
    needed = imported | set(NOT_IMPORTED)
    assert sorted(declared - needed) == [], "declared, but the kit never imports them"
    assert sorted(needed - declared) == [], "imported, but not declared"


def test_the_ffi_extra_is_what_the_in_place_build_imports():
    """`jax-ladder demo` builds the ffi project without isolation from the kit's
    environment (runner.BUILD_TOOLS, which the doctor reports and whose absence
    the runner names in one line); the `ffi` extra is exactly those, and
    scripts/_env.sh installs the same pins before the kit (its own build and
    the demo's need them, from a fresh clone)."""
    extra = PYPROJECT["project"]["optional-dependencies"]["ffi"]
    assert sorted(extra) == sorted(name + spec for name, spec in runner.BUILD_TOOLS.values())
    env_sh = (REPO / "scripts" / "_env.sh").read_text()
    for requirement in extra:
        assert f'"{requirement}"' in env_sh, requirement


def test_a_missing_build_tool_is_one_line_naming_what_to_install(tmp_path, monkeypatch):
    tools = {**runner.BUILD_TOOLS, "surely_not_a_module_xyz": ("nanobind", ">=2.4")}
    del tools["nanobind"]
    monkeypatch.setattr(runner, "BUILD_TOOLS", tools)
    (tmp_path / "CMakeLists.txt").write_text("")
    status, output = runner.build_project(tmp_path, tmp_path / "site")
    assert status != 0
    assert output.count("\n") == 0, output
    assert "needs nanobind in this environment" in output
    # The package by name, not `jax-ladder[ffi]`, which pip may seek on the index.
    assert output.endswith(": pip install 'nanobind>=2.4'"), output
    assert not (tmp_path / "site").exists()  # pip never ran


# A C or C++ compiler's command (cc, c++, gcc-12, x86_64-linux-gnu-g++, clang++-18, cpp).
COMPILER = re.compile(r"(^|-)(cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp)(-[\d.]+)?$")


def path_without_compilers(folder: Path) -> str:
    """One folder for PATH: a link to every command on this PATH but the compilers."""
    folder.mkdir()
    for directory in map(Path, os.environ["PATH"].split(os.pathsep)):
        if not directory.is_dir():
            continue
        for command in directory.iterdir():
            link = folder / command.name
            if COMPILER.search(command.name) or link.is_symlink():
                continue  # a compiler, or a command an earlier folder of PATH has
            if command.is_file() and os.access(command, os.X_OK):
                link.symlink_to(command)
    return str(folder)


# A new user's op and its declaration in the short language, in an empty folder.
MYOP = """import jax.numpy as jnp


def softplus(x):
    return jnp.logaddexp(x, 0.0)
"""
MYOP_SPEC = """import jax.numpy as jnp
import numpy as np

from jax_ladder.opcheck import OpSpec, Ulps
from myop import softplus

SPEC = OpSpec(
    name="softplus",
    op=softplus,
    reference=lambda x: jnp.logaddexp(x, 0.0),
    oracle=lambda x: np.logaddexp(np.asarray(x, np.float64), 0.0),  # float64 NumPy
    signature="x[b,n] -> [b,n]",
    sizes={"b": 4, "n": 8},
    tolerance=Ulps(at_value=2),
    gradient_tolerance=Ulps(at_value=4),
    # the second derivative s * (1 - s): 1 - s keeps an ulp of 1 as s nears 1
    second_order_tolerance=Ulps(at_value=4, at_scale=4),
    batch_axes=("b",),
)
"""
USER_CELLS = "eager,jit,vmap-*,grad-*"  # 15 cells: what a first run takes, in seconds


@pytest.mark.slow
def test_a_default_install_from_a_clone_needs_no_compiler(tmp_path):
    """`pip install .` from a clone, into an empty environment, with no compiler
    reachable (CC and CXX /bin/false, none on PATH): the build compiles nothing, its
    wheel is pure, and the installed `jax-ladder` runs. Then, in an empty folder, a
    new user's op declared in the short language (signature=) passes
    `jax-ladder opcheck --json` and the pytest plugin; the test prints the time
    from the empty folder to the first green run."""
    start = time.monotonic()
    kit = tmp_path / "jax-ladder"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for name in filter(None, tracked.split("\0")):  # what a clone holds, edits included
        if (REPO / name).is_file():
            (kit / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, kit / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    path = os.pathsep.join([str(bin_dir), path_without_compilers(tmp_path / "commands")])
    assert [c for c in ("cc", "c++", "gcc", "g++") if shutil.which(c, path=path)] == []
    # Nothing of the kit's environment, nor of this pytest run's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"CC": "/bin/false", "CXX": "/bin/false", "PATH": path})
    env.pop("PYTHONPATH", None)

    def run(*command, cwd=tmp_path):
        result = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
        )
        assert result.returncode == 0, (
            f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
        return result.stdout

    installed = run(str(bin_dir / "python"), "-m", "pip", "install", str(kit))
    assert re.search(r"jax_ladder-\S+-py3-none-any\.whl", installed), installed[-3000:]
    package = run(str(bin_dir / "python"), "-c", "import jax_ladder; print(jax_ladder.__file__)")
    package = Path(package.strip()).parent
    assert package.is_relative_to(env_dir), package
    assert (package / "templates" / "ffi").is_dir()
    assert not (package / "_ffi_example").exists()
    assert not (package / "_ladder_example").exists()
    assert "usage: jax-ladder" in run(str(bin_dir / "jax-ladder"), "--help")
    installed_at = time.monotonic()

    # A new user's first run: an empty folder, an op, its declaration.
    user = tmp_path / "user"
    user.mkdir()
    (user / "myop.py").write_text(MYOP)
    (user / "myop_spec.py").write_text(MYOP_SPEC)
    command = ["opcheck", "myop_spec.py", "--cells", USER_CELLS, "--json", "out.json"]
    run(str(bin_dir / "jax-ladder"), *command, cwd=user)  # exit 0: no cell failed
    green_at = time.monotonic()
    report = json.loads((user / "out.json").read_text())
    assert report["ok"], report
    (op,) = report["ops"]
    assert op["op"] == "softplus"
    names = {cell["cell"] for cell in op["cells"]}
    assert {"eager", "jit", "vmap-new-axis", "vmap-axis-b", "grad-x"} <= names, names
    assert len(names) == report["totals"]["passed"] == report["totals"]["cells"], report["totals"]
    for cell in op["cells"]:
        assert cell["outcome"] == "passed", cell
        assert cell["seed"] == 0, cell
        assert isinstance(cell["seconds"], float), cell
        assert cell["seconds"] > 0, cell

    # The same declaration through the plugin the install registers.
    plugin = ["--opcheck", "myop_spec.py", "--opcheck-cells", USER_CELLS, "-rA"]
    out = run(str(bin_dir / "python"), "-m", "pytest", *plugin, cwd=user)
    assert "PASSED myop_spec.py::opcheck[softplus][eager]" in out, out[-3000:]
    assert re.search(rf"\b{len(names) + 1} passed\b", out), out[-3000:]  # and [refusals]
    done = time.monotonic()
    print(
        f"from an empty folder to a first green run: {green_at - start:.1f} s "
        f"(clone, venv and install {installed_at - start:.1f} s; first "
        f"`jax-ladder opcheck` {green_at - installed_at:.1f} s); the plugin's run "
        f"{done - green_at:.1f} s"
    )
