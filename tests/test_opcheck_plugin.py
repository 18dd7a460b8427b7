"""The opcheck pytest plugin as a user's suite meets it (issue 60): a failing
cell reproduces in check() from the seed its message names, and says so in a
line, not a traceback; a declaration that fails to import is one failed item;
--opcheck replaces the configured declarations; --collect-only warns of
nothing; recording keeps each test's hand-picked inputs and names the test."""

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import REPO
from test_opcheck import REPLAYED, USER_OP, USER_SPEC, block, pytest_in, user_env, user_folder

# A declaration whose op writes each concrete input it gets, with the test
# running, to the file $OPCHECK_LOG names: what a cell drew.
LOGGED_SPEC = """import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from jax_ladder.opcheck import Arg, OpSpec, Ulps


def logged(x):
    if not isinstance(x, jax.core.Tracer):
        with open(os.environ["OPCHECK_LOG"], "a") as log:
            test = os.environ.get("PYTEST_CURRENT_TEST", "check").split(" ")[0]
            log.write(json.dumps([test, np.asarray(x).tolist()]) + "\\n")
    return jnp.tanh(x)


SPEC = OpSpec(
    name="logged",
    op=logged,
    reference=jnp.tanh,
    oracle=lambda x: np.tanh(np.asarray(x, np.float64)),
    args=(Arg("x", ("n",)),),
    outputs=(("n",),),
    sizes={"n": 8},
    tolerance=Ulps(at_value=4),
    gradient_tolerance=Ulps(at_value=8),
    batch_axes=("n",),
)
"""


def first_inputs(log, test=""):
    """The first input the op got in the test (any: in check())."""
    for line in log.read_text().splitlines():
        name, values = json.loads(line)
        if name.endswith(test):
            return values
    raise AssertionError(f"no call logged from {test}: {log.read_text()[:2000]}")


def test_a_cells_seed_draws_what_check_draws_with_that_seed(tmp_path, monkeypatch):
    (tmp_path / "tests").mkdir()
    declaration = tmp_path / "tests" / "logged_spec.py"
    declaration.write_text(LOGGED_SPEC)
    log = tmp_path / "plugin.log"
    monkeypatch.setenv("OPCHECK_LOG", str(log))
    run = pytest_in(
        tmp_path,
        *("-p", "no:xdist", "-rA", "--opcheck", "tests/logged_spec.py"),
        *("--opcheck-cells", "eager", "--opcheck-seed", "5", "--opcheck-seeds", "2"),
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # Two seeds: each item names its own.
    passed = re.findall(r"^PASSED (\S+)$", run.stdout, re.M)
    assert sorted(passed) == [
        "tests/logged_spec.py::opcheck[logged][eager][seed-5]",
        "tests/logged_spec.py::opcheck[logged][eager][seed-6]",
        "tests/logged_spec.py::opcheck[logged][refusals]",
    ]
    # check() with each seed draws what the plugin's item of that seed drew.
    spec = importlib.util.spec_from_file_location("logged_spec", declaration)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from jax_ladder.opcheck import check

    for seed in (5, 6):
        mine = tmp_path / f"check-{seed}.log"
        monkeypatch.setenv("OPCHECK_LOG", str(mine))
        assert check(module.SPEC, cells="eager", seed=seed).ok
        item = f"opcheck[logged][eager][seed-{seed}]"
        assert first_inputs(mine) == first_inputs(log, item)
    assert first_inputs(tmp_path / "check-5.log") != first_inputs(tmp_path / "check-6.log")


def wrong_folder(tmp_path):
    """The page's declaration with the op's sign flipped (and jvp, which it
    declares refused, now computed: DID NOT RAISE)."""
    folder = user_folder(tmp_path)
    path = folder / "tests" / "softplus_spec.py"
    text = path.read_text()
    wrong = text.replace(
        "@jax.custom_vjp\ndef softplus(x):\n    return jnp.logaddexp(x, 0.0)",
        "def softplus(x):\n    return -jnp.logaddexp(x, 0.0)",
    )
    wrong = wrong.replace("softplus.defvjp(softplus_forward, softplus_backward)\n", "")
    assert wrong != text
    path.write_text(wrong)
    return folder


def test_a_failing_cell_is_one_line_with_its_seed_and_how_to_rerun_it(tmp_path):
    folder = wrong_folder(tmp_path)
    run = pytest_in(folder, "-p", "no:xdist", "--opcheck-cells", "eager,jvp,jit-donate")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "3 failed" in out, out[-3000:]
    failures = out.split("= FAILURES =", 1)[1].split("short test summary", 1)[0]
    # Each failure: its title, the engine's first line, the seed and the reruns.
    assert len(failures.splitlines()) <= 3 * 6, failures
    assert "Traceback" not in failures, failures
    assert "def run_cell" not in failures, failures
    eager = failures.split("opcheck[softplus][eager]", 1)[1]
    assert re.search(r"^\[eager\] eager, output 0: .*ulps of float32", eager, re.M), eager
    rerun = (
        "seed 0; rerun this cell alone: python -m pytest "
        "'tests/softplus_spec.py::opcheck[softplus][eager]' --opcheck-cells eager,jvp,jit-donate "
        "--opcheck-seed 0"
    )
    assert rerun in eager, eager
    assert (
        "or, in Python: check(SPEC, cells='eager', seed=0)  # SPEC from softplus_spec.py" in eager
    )
    cli = "or: jax-ladder opcheck tests/softplus_spec.py::SPEC --cells eager --seed 0"
    assert cli in eager, eager
    # A declared refusal that did not happen (the cell compared the tangents): one line too.
    jvp = failures.split("opcheck[softplus][jvp]", 1)[1]
    assert jvp.split("\n")[1].startswith("[jvp] not the declared refusal (TypeError): jit(jvp)"), (
        jvp
    )

    # The whole traceback, on request.
    run = pytest_in(folder, "-p", "no:xdist", "--opcheck-cells", "eager", "--opcheck-tracebacks")
    assert run.returncode == 1
    assert "def run_cell" in run.stdout, run.stdout[-3000:]
    assert "seed 0; rerun this cell alone:" in run.stdout


def test_the_rerun_command_reproduces_the_failure(tmp_path):
    folder = wrong_folder(tmp_path)
    run = pytest_in(
        folder, "-p", "no:xdist", "-q", "--opcheck-cells", "eager", "--opcheck-seed", "3"
    )
    assert run.returncode == 1, run.stdout[-3000:]
    # Once under FAILURES, and again in the short summary where pytest prints
    # whole messages (on CI).
    (command,) = set(re.findall(r"rerun this cell alone: python -m pytest (.*)$", run.stdout, re.M))
    first = re.search(r"^\[eager\] .*$", run.stdout, re.M).group(0)
    again = pytest_in(folder, "-p", "no:xdist", "-q", *shlex.split(command))
    assert again.returncode == 1
    assert "1 failed" in again.stdout
    assert first in again.stdout  # the same element, the same error: the same inputs


BROKEN_SPEC = "import no_such_module_anywhere  # noqa\n"
USER_TESTS = "def test_mine():\n    assert 1 + 1 == 2\n"


def test_a_declaration_that_fails_to_import_is_one_failed_item(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "broken_spec.py").write_text(BROKEN_SPEC)
    (tmp_path / "tests" / "test_mine.py").write_text(USER_TESTS)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nopcheck_specs = ["tests/broken_spec.py"]\n'
    )
    run = pytest_in(tmp_path, "-p", "no:xdist", "-rA")
    out = run.stdout
    assert run.returncode == 1, out[-3000:] + run.stderr[-3000:]
    assert "Interrupted" not in out, out[-3000:]
    assert "PASSED tests/test_mine.py::test_mine" in out, out[-3000:]
    assert "FAILED tests/broken_spec.py::opcheck[import]" in out, out[-3000:]
    assert "No module named 'no_such_module_anywhere'" in out
    assert re.search(r"\b1 failed, 1 passed\b", out), out[-3000:]


def test_opcheck_replaces_the_configured_declarations_and_collect_only_warns_of_nothing(
    tmp_path,
):
    folder = user_folder(tmp_path)
    (folder / "tests" / "broken_spec.py").write_text(BROKEN_SPEC)
    (folder / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nopcheck_specs = ["tests/broken_spec.py"]\n'
    )
    run = pytest_in(
        folder,
        *("-p", "no:xdist", "--collect-only", "-q"),
        *("--opcheck", "tests/softplus_spec.py", "--opcheck-cells", "eager"),
    )
    out = run.stdout
    assert run.returncode == 0, out[-3000:] + run.stderr[-3000:]
    assert out.splitlines()[:2] == [
        "tests/softplus_spec.py::opcheck[softplus][refusals]",
        "tests/softplus_spec.py::opcheck[softplus][eager]",
    ], out[-3000:]
    assert "broken_spec" not in out, out[-3000:]  # --opcheck named the run's only declaration
    assert "was not collected" not in out, out[-3000:]
    # And a declaration outside what the run collects is still named.
    run = pytest_in(folder, "-p", "no:xdist", "--collect-only", "-q", "tests/test_nothing.py")
    assert "broken_spec.py was not collected" in run.stdout, run.stdout[-3000:]


# A user's test that calls the op on two inputs of one shape and dtype that
# it chose by hand, and another that calls it again on one of them.
HAND_PICKED = """import jax.numpy as jnp

from mypkg import ops


def test_two_hand_picked_points():
    assert ops.softplus(jnp.array([-30.0, 30.0])).shape == (2,)
    assert ops.softplus(jnp.array([0.0, 1e-30])).shape == (2,)


def test_again():
    assert ops.softplus(jnp.array([-30.0, 30.0])).shape == (2,)
"""


def test_recording_keeps_each_tests_hand_picked_inputs_and_names_the_test(tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text(HAND_PICKED)
    (tmp_path / "tests" / "ops_spec.py").write_text(USER_SPEC)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nopcheck_specs = ["tests/ops_spec.py"]\n'
        'opcheck_cells = ["eager"]\nopcheck_replay_cells = ["eager"]\n'
    )
    run = pytest_in(tmp_path, "-p", "no:xdist", "-q", "--opcheck-record")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = (
        "opcheck: recorded mypkg.ops:softplus: 3 call(s), 2 kept; "
        "not kept: 1 the same arguments as a call kept"
    )
    assert summary in run.stdout, run.stdout[-3000:]

    # Both replay; a failure names the input and the test that chose it.
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP.replace("return", "return -"))
    run = pytest_in(tmp_path, "-p", "no:xdist", "-q", "-k", "recorded")
    assert "2 failed" in run.stdout, run.stdout[-3000:]
    for i in (0, 1):
        failure = run.stdout.split(f"opcheck[softplus][recorded-{i}][eager] _", 1)[1]
        failure = failure.split("\n", 1)[1].split("\n_", 1)[0]
        source = f"recorded-{i}, called from tests/test_ops.py::test_two_hand_picked_points"
        assert f"recorded input: {source}" in failure, failure[:2000]


# An elementwise op declared with "..." (any leading axes), which the user's
# tests call with a 2-D and a 3-D array.
LEADING_TESTS = """import jax.numpy as jnp

from mypkg import ops


def test_a_matrix():
    assert ops.softplus(jnp.linspace(-3.0, 3.0, 6).reshape(2, 3)).shape == (2, 3)


def test_a_stack_of_matrices():
    assert ops.softplus(jnp.linspace(-40.0, 40.0, 24).reshape(2, 3, 4)).shape == (2, 3, 4)
"""
LEADING_SPEC = USER_SPEC.replace(
    """    args=(Arg("x", ("n",)),),
    outputs=(("n",),),
    sizes={"n": 8},
""",
    '    signature="x[...] -> [...]",\n',
).replace('    batch_axes=("n",),\n', "")
# Wrong only where the input has 3 axes (its sign flipped).
WRONG_IN_3D = USER_OP.replace(
    "return jnp.logaddexp(x, 0.0)", "return (-1.0 if x.ndim == 3 else 1.0) * jnp.logaddexp(x, 0.0)"
)


def test_recorded_calls_with_leading_axes_replay_at_their_own_rank(tmp_path):
    """A declaration whose argument begins with '...' replays a call of any
    rank: its leading axes are sizes['...'] for the replay. A bug only at
    rank 3 fails in the replay of the 3-D call, and only there."""
    assert LEADING_SPEC.count('signature="x[...] -> [...]"') == 1
    assert "batch_axes" not in LEADING_SPEC
    assert WRONG_IN_3D != USER_OP
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "ops.py").write_text(USER_OP)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text(LEADING_TESTS)
    (tmp_path / "tests" / "ops_spec.py").write_text(LEADING_SPEC)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nopcheck_specs = ["tests/ops_spec.py"]\n'
        'opcheck_cells = ["eager"]\n'
    )
    run = pytest_in(tmp_path, "-p", "no:xdist", "-q", "--opcheck-record")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "opcheck: recorded mypkg.ops:softplus: 2 call(s), 2 kept" in run.stdout, run.stdout

    # Both replay, through the default replay cells, and pass.
    run = pytest_in(tmp_path, "-p", "no:xdist", "-rA", "-k", "recorded")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    passed = re.findall(
        r"^PASSED \S+::opcheck\[softplus\]\[(recorded-\d)\]\[(\S+)\]$", run.stdout, re.M
    )
    assert sorted(passed) == sorted((f"recorded-{i}", c) for i in (0, 1) for c in REPLAYED)

    # The bug at rank 3 fails every replay of the 3-D call, and no other.
    (tmp_path / "mypkg" / "ops.py").write_text(WRONG_IN_3D)
    run = pytest_in(tmp_path, "-p", "no:xdist", "-rA", "-k", "recorded")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    item = r"^(PASSED|FAILED) \S+::opcheck\[softplus\]\[(recorded-\d)\]\[(\S+)\]"
    outcomes = {(i, c): o for o, i, c in re.findall(item, run.stdout, re.M)}
    assert outcomes == {
        (f"recorded-{i}", c): "PASSED" if i == 0 else "FAILED" for i in (0, 1) for c in REPLAYED
    }, run.stdout[-3000:]
    failure = run.stdout.split("opcheck[softplus][recorded-1][eager] _", 1)[1].split("\n_", 1)[0]
    assert re.search(r"^\[eager\] eager, output 0: .* at index \(\d, \d, \d\)", failure, re.M), (
        failure
    )
    source = "recorded-1, called from tests/test_ops.py::test_a_stack_of_matrices"
    assert f"recorded input: {source}" in failure, failure


def test_a_recording_of_a_rank_the_declaration_does_not_take_says_why():
    """Row-wise x[..., n] takes any leading axes (none too) and n from the
    call; x[n] takes one axis, and a 2-D call's item says it cannot be
    replayed and how to declare leading axes."""
    import numpy as np

    from jax_ladder.opcheck import OpSpec, Ulps
    from jax_ladder.opcheck.intercept import Recording, replayed

    def spec(signature, sizes):
        def f(x):
            return x

        return OpSpec(
            name="rows",
            op=f,
            reference=f,
            oracle=f,
            signature=signature,
            sizes=sizes,
            tolerance=Ulps(at_value=1),
            gradient_tolerance=Ulps(at_value=1),
        )

    def recording(*shape):
        return Recording(
            None, "mypkg.ops:rows", "test", (np.zeros(shape, np.float32),), ("float32",)
        )

    rows = spec("x[..., n] -> [..., n]", {"n": 8})
    assert replayed(rows, recording(2, 3, 5)).sizes == {"n": 5, "...": (2, 3)}
    assert replayed(rows, recording(7)).sizes == {"n": 7, "...": ()}
    with pytest.raises(
        ValueError, match=r"x\[\.\.\., n\] needs at least 1: this call cannot be replayed"
    ):
        replayed(rows, recording())
    one = spec("x[n] -> [n]", {"n": 8})
    why = (
        "x was recorded with shape (2, 3) (2 axes), and the declaration x[n] has 1: this call "
        "cannot be replayed (an op that takes any leading axes declares them: x[..., n])"
    )
    with pytest.raises(ValueError, match=re.escape(why)):
        replayed(one, recording(2, 3))


# docs/opcheck.md's samples for these behaviours.
PAGE = (REPO / "docs" / "opcheck.md").read_text()


def test_the_pages_install_command_is_written_out():
    """The page reads right on GitHub and in a checkout: no Sphinx include
    where the install command goes, and the command today's install is."""
    assert "{include}" not in PAGE
    # The kit has no public home yet: a clone's install, or a wheel built from one.
    install = block("console", "pip install")
    assert "$ pip install ./jax-ladder\n" in install
    assert "git+" not in install


def test_the_pages_failure_is_what_the_plugin_prints(tmp_path):
    folder = wrong_folder(tmp_path)
    run = pytest_in(folder, "-p", "no:xdist", "-q", "--opcheck-cells", "eager")
    page = block("console", "", after="<!-- failure-example -->")
    command, printed = page.split("\n", 1)
    assert command == "$ python -m pytest -q --opcheck-cells eager"
    timing = re.compile(r" in \d+\.\d+s$", re.M)
    assert timing.sub("", run.stdout) == timing.sub("", printed)


def test_the_pages_pallas_declaration_passes_its_shard_map_cells(tmp_path):
    (tmp_path / "pallas_spec.py").write_text(block("python", "", after="<!-- pallas-example -->"))
    script = (
        "import jax\n"
        'jax.config.update("jax_num_cpu_devices", 8)\n'
        "from jax_ladder.opcheck import check\n"
        "from pallas_spec import SPEC\n"
        'cells = ["eager", "grad-x", "shard-map-*", "jit-*", "vmap-sharded-*"]\n'
        "report = check(SPEC, cells=cells)\n"
        "print(report)\n"
        "assert report.ok and not report.skipped\n"
        'assert report["shard-map-n-1d"].outcome == "passed"\n'
        'assert report["shard-map-grad-inside-n-2d"].outcome == "passed"\n'
        'assert report["jit-explicit-n"].outcome == "refused"\n'
    )
    path = os.pathsep.join([str(tmp_path), user_env()["PYTHONPATH"]])
    env = {**user_env(), "PYTHONPATH": path}
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_the_pages_check_that_accepts_known_failures(tmp_path, monkeypatch):
    """The page's check() that accepts a few failing cells: it passes, and
    fails on a failure it does not list."""
    folder = user_folder(tmp_path) / "tests"
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "softplus_spec", raising=False)
    script = block("python", "ACCEPTED = ", after="<!-- accept-example -->")
    namespace: dict = {}
    exec(compile(script, "accept-example", "exec"), namespace)
    assert namespace["unexpected"] == []
    assert sorted(r.cell for r in namespace["report"].failed) == sorted(namespace["ACCEPTED"])
    wrong = script.replace("jnp.log1p(jnp.exp(x))", "-jnp.log1p(jnp.exp(x))")
    assert wrong != script
    with pytest.raises(AssertionError, match=r"\[eager\] eager, output 0: "):
        exec(compile(wrong, "accept-example", "exec"), {})


def test_the_pages_failed_cell_line_is_what_check_prints(tmp_path):
    """The page's line of a report with the op's sign flipped."""
    folder = user_folder(tmp_path) / "tests"
    script = (
        "import dataclasses\n"
        "import jax.numpy as jnp\n"
        "from jax_ladder.opcheck import check\n"
        "from softplus_spec import SPEC\n"
        "wrong = dataclasses.replace(SPEC, op=lambda x: -jnp.logaddexp(x, 0.0))\n"
        'print(check(wrong, cells=["eager", "jit", "vmap-new-axis", "grad-x", "jvp"]))\n'
    )
    path = os.pathsep.join([str(folder), user_env()["PYTHONPATH"]])
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder,
        env={**user_env(), "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = block("text", "  eager          failed: ").strip("\n")
    assert line in run.stdout.splitlines(), run.stdout
