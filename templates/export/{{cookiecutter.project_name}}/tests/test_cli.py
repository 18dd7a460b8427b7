{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""export and run as a user runs them: separate processes, files on disk."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.__main__ import main

from compare import assert_close
from devices import cpu_subprocess_env
from op_spec import SPEC

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(*args, cwd):
    # On the CPU (cpu_subprocess_env): this run may hold the accelerator, and
    # a TPU admits one program at a time.
    pythonpath = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = cpu_subprocess_env(PYTHONPATH=pythonpath)
    command = [sys.executable, "-m", artifact.__package__, *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A folder holding model.jax, exported by the CLI (once for this module)."""
    folder = tmp_path_factory.mktemp("cli")
    result = cli("export", "--out", "model.jax", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder


def test_export_then_run_in_a_fresh_process(exported, tmp_path):
    assert (exported / "model.jax").is_file() and (exported / "model.jax.json").is_file()

    metadata = {"inputs": artifact.input_metadata()}
    inputs = artifact.random_inputs(metadata, batch=3{% if seq %}, seq=9{% endif %}, seed=7)
    np.savez(tmp_path / "in.npz", allow_pickle=False, **inputs)
    artifact_file = exported / "model.jax"
    result = cli("run", artifact_file, "--inputs", "in.npz", "--save", "out.npz", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as out:
        assert_close(out["output"], SPEC.oracle(*inputs.values()), SPEC.tolerance)


def test_run_with_random_inputs(exported, capsys):
    # In this process: the fresh process is the test above's.
    assert main(["run", str(exported / "model.jax"), "--batch", "5"]) == 0
    assert "output: shape (5," in capsys.readouterr().out


def test_run_on_a_simulated_gpu_host(exported, monkeypatch, capsys):
    # On a GPU host the default platform is cuda: NumPy inputs would run there.
    # An artifact without cuda runs them on a device of a platform it has
    # (the CPU) instead of failing (exit status 2).
    monkeypatch.setattr(jax.export, "default_export_platform", lambda: "cuda")
    assert main(["run", str(exported / "model.jax"), "--batch", "5"]) == 0, capsys.readouterr().err
    assert "output: shape (5," in capsys.readouterr().out


def test_run_reports_bad_files_without_a_traceback(tmp_path, capsys):
    # main() turns the error into one line and status 2 (checked in this process):
    missing = tmp_path / "missing.jax"
    assert main(["run", str(missing)]) == 2
    assert f"error: no artifact at {missing}" in capsys.readouterr().err
    # and a fresh process exits with it, as a user sees it:
    (tmp_path / "broken.jax").write_bytes(b"\x00" * 10)
    (tmp_path / "broken.jax.json").write_text('{"sha256": "0"}')
    result = cli("run", "broken.jax", cwd=tmp_path)
    assert result.returncode == 2 and "error: " in result.stderr
    assert "corrupted or truncated" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_new_golden_says_what_it_changes(tmp_path, monkeypatch, capsys):
    # --golden overwrites the expected outputs the tests hold the artifact to:
    # it says first by how much they move (a wrong model re-exported shows here).
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--golden"]) == 0
    assert "golden's output" not in capsys.readouterr().out  # nothing to compare with
    assert main(["export", "--golden"]) == 0
    assert "the golden's output is unchanged" in capsys.readouterr().out
    io_path = Path("tests", "golden", "model.io.npz")
    saved = dict(np.load(io_path))
    saved["output"] = saved["output"] + 0.5
    np.savez(io_path, **saved)
    assert main(["export", "--golden"]) == 0
    said = capsys.readouterr().out
    assert "the golden's output changed: largest difference 0.5 against the previous" in said
