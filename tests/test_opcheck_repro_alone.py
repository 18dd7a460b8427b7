"""A repro script is seen to fail alone before it is offered, checks what
the cell checked (abstract result, the same bits twice, values), and says
how to run it without this machine's paths; an error a cell raises says who
raised it (the op, the reference or the oracle) and where.

Planted bugs, in a module of their own under tmp_path as a user's op:
- stale: right on the process's first three calls, wrong (1% off) after
  (a cache that outlives its inputs): a failure that needs what ran before;
- wide: right values, but a float64 NumPy array where eval_shape says
  float32 (computed on the host, outside a trace);
- flaky: within the tolerance, but its sum's order alternates call by call;
- off: 1% off everywhere;
- raising / oracle_raising: an error raised where n is not 16."""

import os
import re
import subprocess
import sys

import pytest

from jax_ladder.opcheck import check
from jax_ladder.opcheck.report import format_failures, group_failures
from jax_ladder.opcheck.shrink import shrink

OPS = '''"""Planted bugs: plain JAX, as a user's module."""

import jax
import jax.numpy as jnp
import numpy as np

CALLS = [0]


def reference(x, w):
    return jnp.sum(x * w, axis=-1)


def stale(x, w):
    CALLS[0] += 1
    return reference(x, w) * (1.01 if CALLS[0] > 3 else 1.0)


def wide(x, w):
    if isinstance(x, jax.core.Tracer):
        return reference(x, w)
    return np.sum(np.asarray(x, np.float64) * np.asarray(w, np.float64), axis=-1)


def flaky(x, w):
    CALLS[0] += 1
    y = x * w
    return jnp.sum(y if CALLS[0] % 2 else y[..., ::-1], axis=-1)


def off(x, w):
    return reference(x, w) * 1.01


def raising(x, w):
    if x.shape[-1] != 16:
        raise ValueError("rows of 16 only")
    return reference(x, w)


def oracle_raising(x, w):
    x, w = np.asarray(x), np.asarray(w)
    if x.shape[-1] != 16:
        raise IndexError("index 16 is out of bounds for axis 0")
    return np.sum(x * w, axis=-1)
'''

SPECS = """import alone_ops as ops

from jax_ladder.opcheck import Arg, OpSpec, Ulps

ARGS = (Arg("x", ("b", "n")), Arg("w", ("n",)))


def spec(name, op, oracle=None):
    return OpSpec(
        name, op, ops.reference, oracle, ARGS, (("b",),), {"b": 8, "n": 16},
        Ulps(4, 4), Ulps(4, 4), batch_axes=("b",),
    )


STALE, WIDE, FLAKY = spec("stale", ops.stale), spec("wide", ops.wide), spec("flaky", ops.flaky)
RAISING, OFF = spec("raising", ops.raising), spec("off", ops.off)
ORACLE_RAISING = spec("oracle_raising", ops.reference, ops.oracle_raising)
"""


@pytest.fixture
def planted(tmp_path, monkeypatch):
    (tmp_path / "alone_ops.py").write_text(OPS)
    (tmp_path / "alone_spec.py").write_text(SPECS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in ("alone_ops", "alone_spec"):
        sys.modules.pop(name, None)
    import alone_spec

    yield alone_spec
    for name in ("alone_ops", "alone_spec"):
        sys.modules.pop(name, None)


def run_as_documented(script, folder):
    """The script run as its docstring says: from the op's folder, PYTHONPATH=."""
    command = re.search(r"^    PYTHONPATH=(\S+) python (\S+)$", script.read_text(), re.M)
    assert command, script.read_text()[:2000]
    env = {**os.environ, "PYTHONPATH": command[1], "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, command[2]], cwd=folder, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_a_failure_that_needs_earlier_cells_is_not_offered_as_a_repro(planted, tmp_path):
    cells = ["eager", "jit", "vmap-new-axis", "vmap-mixed"]
    report = check(planted.STALE, cells, shrink=True, repro_dir=tmp_path / "repro")
    failed = report.failed
    assert failed, str(report)
    for result in failed:
        message = result.message
        assert "still fails at" not in message, message
        assert "repro: python" not in message, message
        assert "shrunk: not reproduced alone: its script, run in a fresh process, passes" in (
            message
        ), message
        assert "the cells run before it in this process: eager, jit" in message, message


@pytest.mark.parametrize(
    ("name", "check_line"), [("WIDE", "abstract result"), ("FLAKY", "elements differ")]
)
def test_a_repro_checks_what_the_cell_checked(planted, tmp_path, name, check_line):
    spec = getattr(planted, name)
    report = check(spec, ["eager"])
    assert report["eager"].outcome == "failed", str(report)
    shrunk = shrink(spec, "eager", repro_dir=tmp_path / "repro")
    assert shrunk is not None
    run = run_as_documented(shrunk.script_path, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(f"FAILS.*{check_line}|{check_line}.*FAILS", run.stdout), run.stdout
    assert "reproduced: a check failed" in run.stdout
    assert shrunk.alone == "reproduced", shrunk  # as shrink() saw it, before offering it


def test_a_repro_names_no_absolute_path_and_says_how_to_run_it(planted, tmp_path):
    for cell in ("eager", "vmap-nested"):  # a standalone script, and the engine's
        shrunk = shrink(planted.OFF, cell, repro_dir=tmp_path / "repro")
        text = shrunk.script_path.read_text()
        assert str(tmp_path) not in text
        assert not re.search(r"(^|[\s'\"=:])/(tmp|home|root|Users|work)/", text), text[:3000]
        assert "from the folder that holds alone_ops.py" in text, text[:3000]
        assert f"    PYTHONPATH=. python repro/{shrunk.script_path.name}\n" in text, text[:3000]


def test_an_error_says_who_raised_it_and_the_advice_fits(planted):
    op = check(planted.RAISING, ["size-n-ragged"])["size-n-ragged"]
    assert op.outcome == "failed"
    line = OPS.splitlines().index('        raise ValueError("rows of 16 only")') + 1
    assert op.message.splitlines()[1] == f"  raised by the op, at alone_ops.py:{line} (raising)", (
        op.message
    )
    oracle = check(planted.ORACLE_RAISING, ["size-n-ragged"])["size-n-ragged"]
    assert oracle.message.splitlines()[1].startswith(
        "  raised by the float64 oracle, at alone_ops.py:"
    ), oracle.message
    # The reference "fails it the same way" (the same oracle raises): no
    # domain= advice for an error, but whose it is to fix.
    lines = "\n".join(
        format_failures(group_failures([oracle]), reference_fails={oracle.cell: oracle.line})
    )
    assert "declare Arg domain" not in lines, lines
    assert "the float64 oracle raises it at alone_ops.py:" in lines, lines
    assert "fix the float64 oracle" in lines, lines
    lines = "\n".join(format_failures(group_failures([op]), reference_fails={op.cell: op.line}))
    assert "the op raises it at alone_ops.py:" in lines, lines
    assert "refuse={'size-n-ragged': Refuse(ValueError, match=..., why=...)}" in lines, lines
