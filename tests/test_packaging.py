"""What the kit ships: a licence in the wheel and sdist, an sdist that holds
the templates but nothing from a local environment or build, and a default
install that compiles nothing (a pure wheel; the compiled FFI examples are the
tests' opt-in, CMakeLists.txt), from which a new user's op, declared in an
empty folder, passes `jax-ladder opcheck` and the pytest plugin (issue 60)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import venv
from importlib import metadata
from pathlib import Path

import pytest
from conftest import REPO


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
