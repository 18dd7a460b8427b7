"""The conformance matrix for an op outside a generated project (issue 51):
docs/opcheck.md's example, run as a user with only the kit installed runs it.
From an empty folder: its declaration file and pytest configuration, then
`python -m pytest` (the pytest11 entry point, or -p where the kit is not
installed with it), and its `check()` call, whose printed report must be the
page's. Then check()'s outcomes in this process: passed, refused with the
declared reason, failed with the error in ulps, skipped for want of devices."""

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import jax_ladder

PAGE = (REPO / "docs" / "opcheck.md").read_text()
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
PLUGIN = "jax_ladder.opcheck.plugin"
# A few cells of each kind, refused and sharded ones among them: seconds, not the whole matrix.
CELLS = "eager,jit,vmap-new-axis,grad-x,jvp,linearize,hard-zeros,jit-auto-n,shard-map-n-1d"


def block(language: str, containing: str, after: str = "") -> str:
    """The page's code block in `language` holding `containing` (after the
    marker `after`, where given)."""
    text = PAGE.split(after, 1)[1] if after else PAGE
    (found,) = [b for lang, b in BLOCK.findall(text) if lang == language and containing in b][:1]
    return found


def user_folder(tmp_path: Path) -> Path:
    """An empty folder given the page's declaration file and configuration."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "softplus_spec.py").write_text(block("python", "SPEC = OpSpec("))
    (tmp_path / "pyproject.toml").write_text(block("toml", "opcheck_specs"))
    return tmp_path


def user_env() -> dict[str, str]:
    """The kit this test imports (a checkout's src/, or the installed one)
    first on the path, as an installed kit is."""
    path = [str(Path(jax_ladder.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    # Not a CI run, whatever runs this test: pytest prints each failure's whole
    # message in its short summary when CI or BUILD_NUMBER is set, and one line
    # elsewhere; the pages show what a user's terminal shows.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, path)), "JAX_PLATFORMS": "cpu"}


def plugin_args() -> list[str]:
    """-p for the plugin, unless the installed kit registers it (both would
    register it twice)."""
    installed = importlib.metadata.entry_points(group="pytest11", name="jax_ladder_opcheck")
    return [] if installed else ["-p", PLUGIN]


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin_args(), *args]
    return subprocess.run(
        command, cwd=folder, env=user_env(), capture_output=True, text=True, timeout=300
    )


def test_the_pages_declaration_runs_as_the_users_tests(tmp_path):
    folder = user_folder(tmp_path)
    run = pytest_in(folder, "-p", "no:xdist", "-rA", "--opcheck-cells", CELLS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    passed = re.findall(
        r"^PASSED tests/softplus_spec.py::opcheck\[softplus\]\[(.+)\]$", run.stdout, re.M
    )
    # Every selected cell ran and passed (jvp and linearize by raising the
    # declared refusal), the sharded ones on the plugin's 8 CPU devices.
    assert sorted(passed) == sorted([*CELLS.split(","), "refusals"]), run.stdout[-3000:]


def test_the_plugin_is_inert_unless_a_declaration_is_named(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\n\ndef test_no_jax():\n    assert 'jax' not in sys.modules\n"
    )
    run = pytest_in(tmp_path, "-p", "no:xdist", "-q")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout


def test_a_cell_pattern_that_names_no_cell_is_an_error(tmp_path):
    folder = user_folder(tmp_path)
    run = pytest_in(folder, "-p", "no:xdist", "-q", "--opcheck-cells", "eager,no-such-cell")
    assert run.returncode != 0
    assert "no cell is named ['no-such-cell']" in run.stdout


def test_the_pages_check_call_prints_the_pages_report(tmp_path):
    folder = user_folder(tmp_path) / "tests"
    script = block("python", "check(SPEC", after="<!-- check-example -->")
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder,
        env={**user_env(), "PYTHONPATH": os.pathsep.join([str(folder), user_env()["PYTHONPATH"]])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == block("text", "", after="<!-- check-output -->")


@pytest.fixture(scope="module")
def declaration(tmp_path_factory):
    """The page's declaration module, imported in this process."""
    path = user_folder(tmp_path_factory.mktemp("user")) / "tests" / "softplus_spec.py"
    spec = importlib.util.spec_from_file_location("softplus_spec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_reports_passed_refused_and_skipped_cells(declaration):
    import jax

    from jax_ladder.opcheck import check

    before = jax.config.jax_enable_x64
    report = check(declaration.SPEC, cells=["eager", "grad-*", "jvp", "jit-auto-n"])
    assert jax.config.jax_enable_x64 == before  # check() turned float64 on for itself only
    assert [r.cell for r in report] == [
        "eager",
        "grad-x",
        "jvp",
        "jit-auto-n",
        "grad-grad-explicit-n",
        "grad-grad-explicit-vmap-new-axis",
        "grad-grad-explicit-vmap-n",
    ]
    assert report["eager"].outcome == "passed"
    assert report["jvp"].outcome == "refused"
    assert report["jvp"].message == declaration.FORWARD_MODE.why
    # This process has however many CPU devices JAX started with: 4 run the mesh.
    if len(jax.devices("cpu")) < 4:
        assert report["jit-auto-n"].outcome == "skipped"
        assert "jax_num_cpu_devices" in report["jit-auto-n"].message
    else:
        assert report["jit-auto-n"].outcome == "passed"
    assert report.ok
    assert str(report).splitlines()[0].startswith("softplus: 7 cells: ")


def test_check_reports_a_wrong_op_failed_with_its_error_in_ulps(declaration):
    import jax.numpy as jnp

    from jax_ladder.opcheck import check

    wrong = dataclasses.replace(declaration.SPEC, op=lambda x: -jnp.logaddexp(x, 0.0))
    report = check(wrong, cells=["eager", "jvp"])
    assert not report.ok
    assert [r.cell for r in report.failed] == ["eager", "jvp"]
    eager = report["eager"].message
    assert re.match(r"\[eager\] eager, output 0: off by \S+ ulps of float32 at index", eager)
    assert "eager  failed: [eager] eager, output 0: " in str(report)
    # A plain function has forward mode: the refusal declared for jvp did not
    # happen, and the cell compared its tangents.
    jvp = report["jvp"].message
    assert jvp.startswith("[jvp] not the declared refusal (TypeError): jit(jvp), tangent"), jvp
    assert "ulps of float32 at index" in jvp


def test_check_refuses_a_selection_or_a_refusal_that_names_no_cell(declaration):
    from jax_ladder.opcheck import Refuse, check

    with pytest.raises(ValueError, match=r"no cell is named \['no-such-cell'\]"):
        check(declaration.SPEC, cells=["no-such-cell"])
    typo = Refuse(TypeError, "", "a typo")
    # Named when the declaration is made (a DeclarationError, a ValueError).
    with pytest.raises(ValueError, match=r"refuse names no cell: 'jpv'; did you mean .*'jvp'"):
        dataclasses.replace(declaration.SPEC, refuse={"jpv": typo})


# Issue 51, part 3: a user's package, its existing test of the op, and a
# declaration that says where the suite looks the op up (INTERCEPT).
USER_OP = "import jax.numpy as jnp\n\n\ndef softplus(x):\n    return jnp.logaddexp(x, 0.0)\n"
USER_TEST = """import jax
import jax.numpy as jnp

from mypkg import ops


def test_softplus_of_a_few_points():
    assert ops.softplus(jnp.linspace(-3.0, 3.0, 5)).shape == (5,)


def test_softplus_of_a_batch():
    x = jnp.arange(12.0) / 4
    assert ops.softplus(x).shape == (12,)
    assert jax.jit(ops.softplus)(x).shape == (12,)  # traced: not recorded
"""
USER_SPEC = """import jax.numpy as jnp
import numpy as np

from jax_ladder.opcheck import Arg, OpSpec, Ulps
from mypkg import ops

INTERCEPT = "mypkg.ops:softplus"

SPEC = OpSpec(
    name="softplus",
    op=ops.softplus,
    reference=lambda x: jnp.logaddexp(x, 0.0),
    oracle=lambda x: np.logaddexp(x, 0.0),
    args=(Arg("x", ("n",)),),
    outputs=(("n",),),
    sizes={"n": 8},
    tolerance=Ulps(at_value=2),
    gradient_tolerance=Ulps(at_value=4),
    batch_axes=("n",),
)
"""
REPLAYED = ["eager", "jit", "vmap-new-axis", "grad-x", "vjp", "jvp"]


def test_recorded_inputs_replay_and_expected_failures_are_listed(tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text(USER_TEST)
    (tmp_path / "tests" / "ops_spec.py").write_text(USER_SPEC)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nopcheck_specs = ["tests/ops_spec.py"]\n'
        'opcheck_cells = ["eager"]\n'  # the replayed cells, and one of the usual
    )

    def run(*args):
        done = pytest_in(tmp_path, "-p", "no:xdist", "-rA", *args)
        return done.returncode, done.stdout

    # 1. The suite runs as before, and the op's concrete calls are recorded.
    code, out = run("--opcheck-record")
    assert code == 0, out[-3000:]
    assert "4 passed" in out, out[-3000:]
    summary = "opcheck: recorded mypkg.ops:softplus: 3 call(s), 2 kept; not kept: 1 traced"
    assert summary in out, out[-3000:]
    assert (tmp_path / "tests" / "ops_spec.recorded.npz").is_file()

    # 2. Each recording replays through the default cells, at its own size.
    code, out = run()
    assert code == 0, out[-3000:]
    replayed = re.findall(
        r"^PASSED tests/ops_spec.py::opcheck\[softplus\]\[(recorded-\d+\]\[.+)\]$", out, re.M
    )
    assert sorted(replayed) == sorted(f"recorded-{i}][{c}" for i in (0, 1) for c in REPLAYED)

    # 3. The op wrong after the recording: its failures, written as expected...
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP.replace("return", "return -"))
    code, out = run("--opcheck-write-failures")
    assert code != 0
    failures = tmp_path / "tests" / "opcheck_failures.json"
    listed = json.loads(failures.read_text())
    replays = [f"opcheck[softplus][recorded-{i}][{c}]" for i in (0, 1) for c in REPLAYED]
    assert sorted(listed) == sorted(["opcheck[softplus][eager]", *replays])
    # ... each with its error's first line, on a recorded input (linspace(-3, 3, 5)).
    eager = listed["opcheck[softplus][recorded-0][eager]"]
    recorded = r"\(x = (-3\.0|-1\.5|0\.0|1\.5|3\.0)\)"
    assert re.match(
        rf"\[eager\] eager, output 0: off by .* ulps of float32 at .* {recorded}", eager
    )

    # ... are expected failures in the next run (which passes).
    code, out = run()
    assert code == 0, out[-3000:]
    assert "13 xfailed" in out, out[-3000:]
    assert f"XFAIL tests/ops_spec.py::opcheck[softplus][recorded-0][eager] - {eager}" in out

    # 4. Strictly: the op fixed, the list fails the run until it is rewritten.
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP)
    code, out = run()
    assert code != 0
    assert "[XPASS(strict)]" in out, out[-3000:]
    code, out = run("--opcheck-write-failures")
    assert code == 0, out[-3000:]
    assert json.loads(failures.read_text()) == {}


def test_a_recording_whose_arguments_disagree_on_an_axis_is_refused(declaration):
    import numpy as np

    from jax_ladder.opcheck import Arg
    from jax_ladder.opcheck.intercept import Recording, replayed

    two = dataclasses.replace(declaration.SPEC, args=(Arg("x", ("n",)), Arg("y", ("n",))))
    recording = Recording(None, "m:f", "t", (np.zeros(3), np.zeros(4)), ("float32", "float32"))
    with pytest.raises(ValueError, match=r"axis 'n' is 3 in x and 4 in y as recorded"):
        replayed(two, recording)
    fits = Recording(None, "m:f", "t", (np.arange(3.0), np.ones(3)), ("float32", "float32"))
    spec = replayed(two, fits)
    assert spec.sizes["n"] == 3
    assert spec.dtype == "float32"
    assert spec.args[0].sample(np.random.default_rng(0), (3,)).tolist() == [0.0, 1.0, 2.0]


def test_a_bare_assert_inside_the_op_says_where_it_was_raised():
    """An internal `assert` of JAX or the op (no message) is no comparison of
    the engine's: the cell's message names where it was raised, not nothing
    (a Pallas kernel's jvp under vmap gave "[vmap-of-grad-inner] " alone)."""
    from jax_ladder.opcheck import OpSpec, Ulps, check

    def checked_op(x):
        if x.shape[0] > 0:  # as a bare `assert` does, unrewritten by pytest
            raise AssertionError
        return x

    spec = OpSpec(
        name="bare",
        op=checked_op,
        reference=lambda x: x,
        oracle=None,
        signature="x[n] -> [n]",
        sizes={"n": 4},
        tolerance=Ulps(0),
        gradient_tolerance=Ulps(0),
    )
    (result,) = check(spec, cells="eager")
    assert result.outcome == "failed"
    assert "AssertionError without a message at test_opcheck.py:" in result.message
    assert "(checked_op: raise AssertionError)" in result.message


def test_a_refusal_whose_pattern_does_not_match_says_what_was_raised():
    """The declared error type with another message: the cell says what the
    op raised (it said 'Regex pattern did not match.' alone)."""
    from jax_ladder.opcheck import OpSpec, Refuse, Ulps, check

    def refusing(x):
        raise ValueError("the kernel's grid is computed in Python")

    spec = OpSpec(
        name="refusing",
        op=refusing,
        reference=lambda x: x,
        oracle=None,
        signature="x[n] -> [n]",
        sizes={"n": 4},
        tolerance=Ulps(0),
        gradient_tolerance=Ulps(0),
        refuse={"eager": Refuse(ValueError, "symbolic shapes", "why")},
    )
    (result,) = check(spec, cells="eager")
    assert result.outcome == "failed"
    assert result.line == (
        "[eager] not the declared refusal (ValueError): raised ValueError: the kernel's grid "
        "is computed in Python, which the declared refusal's pattern 'symbolic shapes' does "
        "not match"
    )
