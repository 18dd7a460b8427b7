"""scripts/hardware-check: its CPU mode (what CI can run), its rules, and its
machinery end to end on one check, so the script works when a GPU finally runs it."""

import importlib.machinery
import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO

from jax_ladder.options import load_options, resolve
from jax_ladder.rungs import by_name, template_dir

SCRIPT = REPO / "scripts" / "hardware-check"


def load_script():
    loader = importlib.machinery.SourceFileLoader("hardware_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader("hardware_check", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hardware_check"] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


hw = load_script()


def test_without_an_accelerator_it_lists_the_plan_and_exits_0():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "No GPU or TPU here" in result.stdout
    for line in ("--set backend=mosaic_gpu", "--set cuda=yes", "examples/pallas"):
        assert line in result.stdout


@pytest.mark.parametrize("kind", ["gpu", "tpu"])
def test_every_planned_variant_is_a_valid_bake(kind):
    for check in hw.plan(kind):
        if check.example:
            assert (REPO / "examples" / check.example / "bench.py").is_file()
        else:
            rung = by_name(check.rung)
            resolve(load_options(template_dir(rung)), check.options)  # raises if invalid


@pytest.mark.parametrize(
    ("reason", "kind", "allowed"),
    [
        ("needs a TPU device", "gpu", True),
        ("needs a TPU device", "tpu", False),
        ("needs an NVIDIA GPU and jax[cuda]", "gpu", False),
        ("needs an NVIDIA GPU and jax[cuda]", "tpu", True),
        ("no CUDA compiler here, so none was built", "gpu", False),
        ("needs cmake and a C++ compiler", "gpu", False),  # not about accelerators: not allowed
        ("no golden artifact", "tpu", False),
        ("needs a TPU or an NVIDIA GPU", "gpu", False),  # names this kind too: not allowed
    ],
)
def test_only_skips_for_the_other_accelerator_are_allowed(reason, kind, allowed):
    assert hw.skip_is_allowed(reason, kind) is allowed


def test_the_jax_range_check_reads_the_templates_pin():
    spec = hw.supported_range()
    assert spec == ">=0.10,<0.13"
    assert hw.in_range("0.12.0.1", spec)
    assert hw.in_range("0.12.3", spec)
    # The lent GPU machine's JAX (0.11.2, CUDA 13) is inside the window.
    assert hw.in_range("0.11.2", spec)
    assert hw.in_range("0.10.0", spec)
    assert not hw.in_range("0.9.2", spec)
    assert not hw.in_range("0.13.0", spec)
    assert not hw.in_range("0.13", spec)  # the exclusive upper bound itself


def test_one_check_runs_end_to_end_on_the_cpu(tmp_path):
    """The export variant also runs on a CPU: bake, tests, JUnit, bench, table."""
    (check,) = [c for c in hw.plan("tpu") if c.rung == "export"]
    logs = tmp_path / "logs"
    logs.mkdir()
    result = hw.run_check(check, "tpu", tmp_path, logs)
    assert result.ok, (result.note, result.bad_skips, result.failed)
    assert result.passed > 10
    assert "x" in result.speed
