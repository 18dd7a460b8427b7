{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""export and run as a user runs them: separate processes, files on disk."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import init_params, predict

from oracle import assert_close, rtol_for

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", artifact.__package__, *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_export_then_run_in_a_fresh_process(tmp_path):
    result = cli("export", "--out", "model.jax", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "model.jax").is_file() and (tmp_path / "model.jax.json").is_file()

    rng = np.random.default_rng(7)
    x = rng.standard_normal(({% if seq %}3, 9, {% else %}3, {% endif %}16)).astype(np.float32)
{%- if seq %}
    mask = rng.random((3, 9)) < 0.7
    np.savez(tmp_path / "in.npz", x=x, mask=mask)
{%- else %}
    np.savez(tmp_path / "in.npz", x=x)
{%- endif %}
    result = cli("run", "model.jax", "--inputs", "in.npz", "--save", "out.npz", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as out:
        assert_close(out["output"], predict(init_params(), x{% if seq %}, mask{% endif %}), rtol_for("float32"))


def test_run_with_random_inputs(tmp_path):
    assert cli("export", "--out", "m.jax", cwd=tmp_path).returncode == 0
    result = cli("run", "m.jax", "--batch", "5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "shape (5, 4)" in result.stdout


def test_run_reports_bad_files_without_a_traceback(tmp_path):
    result = cli("run", "missing.jax", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: no artifact at missing.jax" in result.stderr
    assert "Traceback" not in result.stderr
    (tmp_path / "broken.jax").write_bytes(b"\x00" * 10)
    (tmp_path / "broken.jax.json").write_text('{"sha256": "0"}')
    result = cli("run", "broken.jax", cwd=tmp_path)
    assert result.returncode == 2 and "corrupted or truncated" in result.stderr
