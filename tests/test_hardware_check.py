"""scripts/hardware-check: its CPU mode (what CI can run), its rules, and its
machinery end to end on one check, so the script works when a GPU finally runs it."""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import threading

import pytest
from conftest import REPO

from jax_ladder.options import load_options, resolve
from jax_ladder.rungs import available, by_name, template_dir

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
    (check,) = [c for c in hw.plan("tpu") if c.rung == "export" and c.options]
    logs = tmp_path / "logs"
    logs.mkdir()
    result = hw.run_check(check, "tpu", tmp_path, logs)
    assert result.ok, (result.note, result.bad_skips, result.failed)
    assert result.passed > 10
    assert "x" in result.speed


@pytest.mark.parametrize("kind", ["gpu", "tpu"])
def test_the_plan_covers_the_native_variants_every_default_and_every_example(kind):
    """What a user on that accelerator runs: every registered template's default variant
    (baked as such, or a native variant with only default options), the native variants,
    and every example folder with tests and a benchmark."""
    checks = hw.plan(kind)
    assert len({(c.label, c.variant) for c in checks}) == len(checks)
    assert all(check in checks for check in hw.NATIVE[kind])
    for rung in available():
        defaults = [c for c in checks if c.rung == rung.name and not c.example and hw.is_default(c)]
        assert len(defaults) == 1, rung.name
    examples = {c.example for c in checks if c.example}
    assert {"ffi", "ladder"} <= examples
    assert examples == {p.name for p in (REPO / "examples").iterdir() if any(p.glob("test_*.py"))}


def test_the_gpu_plan_holds_the_pallas_default_and_the_native_backends():
    variants = {(c.rung, tuple(sorted(c.options.items()))) for c in hw.plan("gpu")}
    assert ("pallas", ()) in variants  # backend=tpu: on a GPU it lowers or interprets
    assert ("pallas", (("backend", "mosaic_gpu"),)) in variants
    assert ("pallas", (("backend", "triton"),)) in variants
    assert ("ffi", (("cuda", "yes"),)) in variants
    assert ("ffi", ()) in variants


def test_the_tests_run_without_preallocating_the_accelerators_memory(monkeypatch, tmp_path):
    calls = []

    def fake_run(command, **kwargs):
        calls.append((command, kwargs))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(hw.subprocess, "run", fake_run)
    check = hw.Check("ffi", "example", example="ffi")
    result = hw.Result(check, project=REPO / "examples" / "ffi", code=tmp_path, log=tmp_path / "x")
    hw.run_tests(result, "gpu")
    hw.run_bench(result, 10)
    (tests_command, tests), (_, bench) = calls
    assert tests["env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert tests["env"]["PYTHONPATH"].startswith(str(tmp_path))
    assert tests_command[-3:-1] == ["-o", "addopts="]  # one process: no pytest-xdist workers
    # A benchmark runs alone, with JAX's own memory settings.
    variable = "XLA_PYTHON_CLIENT_PREALLOCATE"
    assert bench["env"].get(variable) == os.environ.get(variable)


def test_every_checks_tests_run_at_once(monkeypatch, tmp_path):
    """All checks' pytest processes run together: each waits here for all the others."""
    checks = [hw.Check(name, "example", example=name) for name in ("ffi", "ladder", "pallas")]
    together = threading.Barrier(len(checks), timeout=30)
    monkeypatch.setattr(hw, "build", lambda result, work: None)
    monkeypatch.setattr(hw, "run_tests", lambda result, kind: together.wait())
    results = hw.test_all(checks, "gpu", tmp_path, tmp_path)
    assert [r.note for r in results] == ["", "", ""]
    assert [r.check for r in results] == checks


def test_help_says_how_to_bring_the_missing_packages_without_a_network():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert 'pip download cookiecutter "pytest>=9" -d wheels' in text
    assert "pip install --no-index --find-links wheels cookiecutter pytest" in text
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in text


# `python -S`: a Python with nothing beyond the standard library, as on a TPU
# VM's image or a system python3 (issue 48: the script ended in a
# ModuleNotFoundError for cookiecutter there).
def test_the_plan_lists_with_the_standard_library_alone():
    bare = [sys.executable, "-S", str(SCRIPT), "--plan", "tpu"]
    result = subprocess.run(bare, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "--set backend=tpu" in result.stdout


def test_a_python_without_the_tools_is_told_what_to_install():
    result = subprocess.run([sys.executable, "-S", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr, result.stderr
    first = result.stderr.splitlines()[0]
    for name in ("cookiecutter", "pytest", sys.executable):
        assert name in first, first
    assert "pip download" in result.stderr
    assert "--no-index --find-links wheels" in result.stderr
