"""The block-size tuner (tune.py), optional: delete this file with
src/{{ cookiecutter.package_name }}/tune.py if you do not tune. The op reads the tuned table
(block_table.py) either way; tests/test_composed.py checks that."""

import json
from functools import partial

import jax
import numpy as np
import pytest
from jax import export

from {{ cookiecutter.package_name }} import IMPLEMENTATION_ENV, backend, block_table, kernel, tune

# isort: split
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}

import target
from test_composed import operands, record_kernel_calls, runs_kernel

# As in tests/test_composed.py: small, yet large enough that each target's
# BAD_BLOCKS stay invalid after clamping to the arrays.
SHAPE = (128, 256, 64)
REFUSED = [{**kernel.DEFAULT_BLOCKS, **target.BAD_BLOCKS}[key] for key in block_table.KEYS]


def test_tuner_rejects_a_wrong_candidate_and_the_op_uses_its_table(tmp_path, monkeypatch, capsys):
    """The tuner checks each candidate before timing it: the default blocks,
    broken here on purpose, are rejected, and the other candidate is written to
    the table; the op then reads the table at trace time, for that shape
    bucket only."""
    default = tuple(kernel.DEFAULT_BLOCKS.values())
    other = next(c for c in kernel.TUNING_CANDIDATES if c != default)
    real = kernel.matmul

    def broken_with_default_blocks(*args, **kw):
        out = real(*args, **kw)
        wrong = (kw["block_m"], kw["block_n"], kw["block_k"]) == default
        return out + 1 if wrong and not isinstance(out, tuple) else out

    monkeypatch.setattr(kernel, "matmul", broken_with_default_blocks)
    table = tmp_path / "blocks.json"
    (m, k, n), spec = SHAPE, [",".join(map(str, c)) for c in (default, other)]
    argv = ["--shape", str(m), str(k), str(n), "--dtype", "float32", "--output", str(table)]
    assert tune.main([*argv, "--repeats", "1", "--candidates", *spec]) == 0
    out = capsys.readouterr().out
    # Off the kernel's platform the tuner says its timings are meaningless; on
    # it, it does not.
    native = export.default_export_platform() == backend.PLATFORM
    assert ("mean nothing" in out) != native
    assert f"blocks {default}: wrong answer" in out
    entries = json.loads(table.read_text())[block_table.device_kind()]["float32"]
    assert list(entries) == [block_table.bucket(m, k, n)]
    entry = entries[block_table.bucket(m, k, n)]
    assert entry["blocks"] == list(other)
    # How it was measured, beside it: when, on which JAX, and the times.
    measured = entry["measured"]
    assert measured["jax"] == jax.__version__ and measured["shape"] == [m, k, n]
    assert measured["forward_ms"] > 0 and measured["value_and_grad_ms"] > 0
    assert measured["interpreted"] == (not native)

    monkeypatch.setenv(block_table.BLOCK_TABLE_ENV, str(table))
    calls = record_kernel_calls(monkeypatch)

    def blocks_used(shape):
        args = operands(np.random.default_rng(0), shape)
        # Interpreted, so that only this host's entries apply (as the tuner
        # wrote them); test_blocks_are_tuned_for_the_device_the_kernel_runs_on
        # checks the native kernel's.
        runs_kernel(calls, partial({{ cookiecutter.op_name }}, implementation="kernel", interpret=True), *args)
        return {(kw["block_m"], kw["block_n"], kw["block_k"]) for kw in calls}

    assert blocks_used(SHAPE) == {other}
    assert blocks_used((8, 128, 128)) == {default}  # another bucket: the defaults


@pytest.mark.parametrize(
    "argv", [["--shape", "0", "8", "8"], ["--shape", "8", "8", "8", "--repeats", "0"]]
)
def test_the_tuner_refuses_an_empty_shape_clearly(tmp_path, capsys, argv):
    """A size of 0 (or no repeat) is a usage error naming it, not a crash in the kernel."""
    with pytest.raises(SystemExit) as exit_:
        tune.main([*argv, "--output", str(tmp_path / "blocks.json")])
    assert exit_.value.code == 2
    assert "must be positive, got 0" in capsys.readouterr().err
    assert not (tmp_path / "blocks.json").exists()


def test_tuner_times_the_kernel_whatever_the_environment_says(tmp_path, monkeypatch, capsys):
    """IMPLEMENTATION_ENV=reference does not reach the tuner: it checks and
    times the kernel, so blocks the kernel refuses are refused, not timed on
    the reference and written to the table."""
    monkeypatch.setenv(IMPLEMENTATION_ENV, "reference")
    kernel_calls = record_kernel_calls(monkeypatch)
    default = tuple(kernel.DEFAULT_BLOCKS.values())
    table = tmp_path / "blocks.json"
    (m, k, n), spec = SHAPE, [",".join(map(str, c)) for c in (REFUSED, default)]
    argv = ["--shape", str(m), str(k), str(n), "--dtype", "float32", "--output", str(table)]
    assert tune.main([*argv, "--repeats", "1", "--candidates", *spec]) == 0
    assert f"blocks {tuple(REFUSED)}: refused" in capsys.readouterr().out
    entries = json.loads(table.read_text())[block_table.device_kind()]["float32"]
    assert entries[block_table.bucket(m, k, n)]["blocks"] == list(default)
    assert default in {(kw["block_m"], kw["block_n"], kw["block_k"]) for kw in kernel_calls}
