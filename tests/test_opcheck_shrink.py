"""Shrinking a failing cell and its standalone repro (issue 60, item 4), and
what a failure's message says (item 5).

A planted bug, written into a module of its own under tmp_path as a user's
op would be: a row sum that drops the row's last element once the row is
longer than 3, and a twin 1% off everywhere. shrink() finds the smallest
sizes that still fail; the script it writes, run alone (plain JAX, the op's
module on PYTHONPATH), exits 1 and prints the error; the same script with
the right op exits 0, so it is no test that cannot fail."""

import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jax_ladder
from jax_ladder.opcheck import Ulps, check
from jax_ladder.opcheck.compare import assert_close, summary
from jax_ladder.opcheck.shrink import shrink, signature

OPS = '''"""Planted bugs: plain JAX, as a user's module."""

import jax.numpy as jnp


def reference(x, w):
    return jnp.sum(x * w, axis=-1)


def right(x, w):
    return jnp.einsum("bn,n->b", x, w, precision="highest") if x.ndim == 2 else reference(x, w)


def dropping(x, w):
    """Wrong once a row is longer than 3: its last element is left out."""
    n = x.shape[-1]
    y = x * w
    return jnp.sum(y[..., : n - 1], axis=-1) if n > 3 else jnp.sum(y, axis=-1)


def scaled(x, w):
    """1% off everywhere."""
    return reference(x, w) * 1.01
'''

SPECS = '''"""The declarations of the planted ops."""

import planted_ops as ops

from jax_ladder.opcheck import Arg, OpSpec, Ulps

ARGS = (Arg("x", ("b", "n")), Arg("w", ("n",)))


def spec(op):
    return OpSpec(
        "rowdot", op, ops.reference, None, ARGS, (("b",),), {"b": 8, "n": 16},
        Ulps(4, 4), Ulps(4, 4), batch_axes=("b",),
    )


DROPPING, SCALED, RIGHT = spec(ops.dropping), spec(ops.scaled), spec(ops.right)
'''


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The planted ops' module and their declarations, importable as a
    user's (tmp_path on sys.path, as PYTHONPATH would put it)."""
    (tmp_path / "planted_ops.py").write_text(OPS)
    (tmp_path / "planted_spec.py").write_text(SPECS)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("planted_ops", "planted_spec"):
        sys.modules.pop(name, None)
    import planted_spec

    yield planted_spec
    for name in ("planted_ops", "planted_spec"):
        sys.modules.pop(name, None)


def run_alone(script: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    """The script in a process of its own, with only `paths` on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )


def with_op(script: Path, name: str) -> Path:
    """The script importing another op of planted_ops in its place."""
    text = script.read_text()
    twin = re.sub(
        r"from planted_ops import \w+ as op", f"from planted_ops import {name} as op", text
    )
    assert twin != text
    path = script.with_name(f"{script.stem}_{name}.py")
    path.write_text(twin)
    return path


@pytest.mark.parametrize(
    ("wrong", "cell", "sizes"),
    [
        ("DROPPING", "jit", {"b": 1, "n": 4}),
        ("DROPPING", "vmap-mixed", {"b": 1, "n": 4}),
        ("SCALED", "grad-x", {"b": 1, "n": 1}),
        ("DROPPING", "hard-ties", {"b": 1, "n": 4}),
    ],
)
def test_shrink_finds_the_smallest_sizes_and_a_repro_that_fails_alone(
    planted, tmp_path, wrong, cell, sizes
):
    spec = getattr(planted, wrong)
    report = check(spec, [cell], seed=3)
    assert report[cell].outcome == "failed"
    assert check(planted.RIGHT, [cell], seed=3)[cell].outcome == "passed"
    assert shrink(planted.RIGHT, cell, seed=3) is None  # nothing to shrink

    shrunk = shrink(spec, cell, seed=3, repro_dir=tmp_path / "repro")
    assert shrunk is not None
    assert dict(shrunk.sizes) == sizes, shrunk
    assert shrunk.runs <= 40
    assert signature(shrunk.message) == signature(report[cell].message)
    script = shrunk.script_path
    assert script is not None
    assert script.exists()
    text = script.read_text()
    assert not re.search(r"^\s*(import|from) jax_ladder", text, re.M)  # standalone
    assert "np.array(" in text  # the failing inputs, embedded

    failing = run_alone(script, tmp_path)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "FAILS: worst error" in failing.stdout, failing.stdout
    assert "reproduced" in failing.stdout

    fixed = run_alone(with_op(script, "right"), tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "FAILS" not in fixed.stdout


def test_a_cell_without_a_standalone_repro_reruns_through_the_engine(planted, tmp_path):
    shrunk = shrink(planted.DROPPING, "vmap-nested", seed=0, repro_dir=tmp_path / "repro")
    assert shrunk is not None
    assert dict(shrunk.sizes)["n"] == 4
    text = shrunk.script_path.read_text()
    assert "through the\nengine" in text
    assert "from planted_spec import DROPPING as SPEC" in text
    kit = Path(jax_ladder.__file__).parents[1]
    run = run_alone(shrunk.script_path, kit, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "vmap-nested" in run.stdout


def test_check_shrinks_each_failed_cell_when_asked(planted, tmp_path):
    report = check(planted.DROPPING, ["eager", "jit"], seed=1, shrink=True, repro_dir=tmp_path)
    for cell in ("eager", "jit"):
        message = report[cell].message
        assert "shrunk: still fails at b = 1 (declared 8), n = 4 (declared 16)" in message, message
        path = re.search(r"repro: python (\S+)", message)
        assert path, message
        assert Path(path[1]).exists(), message


# --- Messages --------------------------------------------------------------------
def test_a_bfloat16_failure_says_its_error_in_both_units():
    want = np.array([1.0, 1.2145, 3.0])
    got = np.array([1.0, 1.203125, 3.0]).astype(jnp.bfloat16)  # 1.46 ulps of bfloat16 off
    with pytest.raises(AssertionError) as error:
        assert_close(got, want, Ulps(at_value=4), where="eager, output 0")
    first, tolerance = str(error.value).splitlines()[:2]
    assert re.fullmatch(
        r"eager, output 0: off by 1\.46 ulps of bfloat16 \(= 9\.\d+e\+04 ulps of float32, the "
        r"accumulator\) at index \(1,\); allowed 0\.5 ulp of bfloat16: got 1\.203125, "
        r"want 1\.2145",
        first,
    ), first
    assert tolerance == (
        "  tolerance: Ulps(at_value=4, at_scale=0.0) = 4 ulps of float32 at the value + "
        "1/2 ulp of bfloat16 for rounding the result to bfloat16"
    ), tolerance


def test_an_input_is_shown_whole_when_small_else_its_slice_or_range():
    assert (
        summary("x", np.float32([[1, 2], [3, 0.5]]))
        == "x: float32[2, 2] = [[1.0, 2.0], [3.0, 0.5]]"
    )
    rows = np.arange(40, dtype=np.float32).reshape(10, 4)
    assert summary("x", rows, (2, None)) == "x: float32[10, 4], x[2, :] = [8.0, 9.0, 10.0, 11.0]"
    assert summary("x", rows) == "x: float32[10, 4], min 0, max 39"


def test_a_vmap_failure_names_its_axes_and_the_batched_inputs(planted):
    spec = dataclasses.replace(planted.DROPPING, sizes={"b": 2, "n": 4})
    message = check(spec, ["vmap-mixed"])["vmap-mixed"].message
    lines = message.splitlines()
    assert lines[0].startswith(
        "[vmap-mixed] vmap, mixed in_axes, batch axis 1 out, output 0: off by"
    )
    assert "  batched: in_axes=[2, None], out_axes=1; the element is in slice " in message, message
    assert re.search(r"  input x \(batched on axis 2\): float32\[2, 4, 2\]", message), message
    assert re.search(r"  input w: float32\[4\] = \[\S+, \S+, \S+, \S+\]", message), message


def test_every_value_cell_failure_shows_the_inputs(planted):
    spec = dataclasses.replace(planted.DROPPING, sizes={"b": 2, "n": 4})
    report = check(spec, ["jit", "vmap-nested", "scan", "jacfwd"])
    for result in report:
        assert result.outcome == "failed", result
        assert re.search(r"^  input x", result.message, re.M), result.message


def test_the_plugin_shrinks_a_failed_cell_when_asked(planted, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    kit = str(Path(jax_ladder.__file__).parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([kit, str(tmp_path)]),
        "JAX_PLATFORMS": "cpu",
    }
    installed = importlib.metadata.entry_points(group="pytest11", name="jax_ladder_opcheck")
    plugin = [] if installed else ["-p", "jax_ladder.opcheck.plugin"]
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *plugin]
    command += ["--opcheck", "planted_spec.py::DROPPING", "--opcheck-cells", "jit"]
    command += ["--opcheck-shrink", "--opcheck-repro-dir", "repro"]
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "shrunk: still fails at b = 1 (declared 8), n = 4 (declared 16)" in run.stdout, (
        run.stdout
    )
    script = tmp_path / "repro" / "repro_rowdot_jit.py"
    assert f"repro: python {script}" in run.stdout, run.stdout
    assert run_alone(script, tmp_path).returncode == 1


def test_the_command_shrinks_the_first_failure_of_each_cause(planted, tmp_path):
    kit = str(Path(jax_ladder.__file__).parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([kit, str(tmp_path)]),
        "JAX_PLATFORMS": "cpu",
    }
    command = [sys.executable, "-m", "jax_ladder", "opcheck", "planted_spec.py::DROPPING"]
    command += ["--cells", "eager,jit", "--shrink", "--repro-dir", "repro"]
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    # eager and jit fail alike (one likely cause): the first of them is shrunk.
    assert run.stdout.count("shrunk: still fails at b = 1 (declared 8), n = 4") == 1, run.stdout
    assert "repro: python repro/repro_rowdot_eager.py" in run.stdout, run.stdout
    assert run_alone(tmp_path / "repro" / "repro_rowdot_eager.py", tmp_path).returncode == 1
