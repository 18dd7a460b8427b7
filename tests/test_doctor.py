"""`jax-ladder doctor`: runs here and exits 0; the assessment (rung statuses,
known problems by version range, fatal problems) on made-up facts."""

import copy
import importlib.metadata as metadata
import json
import sys
import time

import pytest
from conftest import run_cli

from jax_ladder import cli, doctor
from jax_ladder.rungs import LADDER

STATUSES = {doctor.RUNS, doctor.LOWER_ONLY, doctor.INTERPRET_ONLY, doctor.CANNOT}


def test_doctor_runs_here(tmp_path):
    start = time.perf_counter()
    result = run_cli("doctor", cwd=tmp_path)
    elapsed = time.perf_counter() - start
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    print(out)  # shown with -s: the CI log keeps the doctor's report
    assert "Traceback" not in out + result.stderr
    assert f"python      {'.'.join(map(str, sys.version_info[:3]))}" in out
    assert f"jax         {metadata.version('jax')}" in out
    assert f"jaxlib      {metadata.version('jaxlib')}" in out
    assert "backend     cpu" in out
    for name in ("cookiecutter", "nanobind", "scikit-build-core", "cmake", "nvcc", "c++"):
        assert name in out
    for rung in LADDER:
        line = next(x for x in out.splitlines() if f" {rung.step}. {rung.name} " in x)
        assert any(f" {status} " in line for status in STATUSES), line
    assert "The kit works here" in out
    assert elapsed < 60  # typically 2 s; generous for a loaded CI machine


def test_doctor_json(tmp_path):
    result = run_cli("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["fatal"] == []
    assert [r["name"] for r in data["rungs"]] == [r.name for r in LADDER]
    assert {r["status"] for r in data["rungs"]} <= STATUSES
    assert data["facts"]["packages"]["jax"] == metadata.version("jax")
    assert "cpu" in data["facts"]["jax"]["backends"]


# -- the assessment on made-up facts ------------------------------------------------

BASE = {
    "kit": "0.1.0",
    "python": "3.12.1",
    "executable": "/usr/bin/python3",
    "packages": {
        "jax": "0.12.0.1",
        "jaxlib": "0.12.0.1",
        "cookiecutter": "2.7.1",
        "numpy": "2.0.0",
        "nanobind": "2.4.0",
        "scikit-build-core": "0.10.7",
        "flatbuffers": "24.3.25",
        "pytest": "8.3.0",
        "ruff": "0.6.0",
    },
    "plugins": {},
    "env": {"XLA_FLAGS": None, "JAX_PLATFORMS": None},
    "templates_problem": None,
    "tools": {
        "c++": {"path": "/usr/bin/c++", "version": "12.2.0"},
        "g++": {"path": "/usr/bin/g++", "version": "12.2.0"},
        "clang++": None,
        "cmake": {"path": "/usr/bin/cmake", "version": "3.25.1"},
        "nvcc": None,
    },
    "jax": {
        "ok": True,
        "jax": "0.12.0.1",
        "jaxlib": "0.12.0.1",
        "backends": {"cpu": [{"kind": "cpu", "id": 0, "compute_capability": None}]},
        "default_backend": "cpu",
        "extend": True,
    },
}


def facts(**changes):
    """BASE with changes; keys like packages__jaxlib set nested values."""
    f = copy.deepcopy(BASE)
    for key, value in changes.items():
        *path, last = key.split("__")
        target = f
        for part in path:
            target = target[part]
        target[last] = value
    return f


def warning_ids(f):
    return [p.id for p, _ in doctor.assess(f).warnings]


def status(f, rung):
    return next((s, why) for _, name, s, why in doctor.assess(f).rungs if name == rung)


@pytest.mark.parametrize(
    ("jaxlib", "hit"),
    [
        ("0.10.2", False),
        ("0.11.0", False),
        ("0.11.1", True),
        ("0.11.2", True),
        ("0.12.0", True),
        ("0.12.0.1", True),
        ("0.12.0.2", False),
        ("0.12.1", False),
        ("0.13.0", False),
    ],
)
def test_ynn_miscompilation_warning_follows_the_jaxlib_range(jaxlib, hit):
    f = facts(packages__jaxlib=jaxlib, packages__jax=jaxlib)
    assert ("xla-cpu-ynn-grad" in warning_ids(f)) == hit


def test_ynn_workaround_in_place_is_recognised():
    flag = "--xla_force_host_platform_device_count=8 " + doctor.YNN_FLAG
    report = doctor.assess(facts(env__XLA_FLAGS=flag))
    [(problem, fixed)] = [(p, x) for p, x in report.warnings if p.id == "xla-cpu-ynn-grad"]
    assert fixed
    text = doctor.render(report)
    assert "workaround in place: XLA_FLAGS=" in text
    assert "(0 warning(s))" in text


def test_the_installed_versions_get_the_ynn_warning_text():
    text = " ".join(doctor.render(doctor.assess(facts())).split())  # unwrapped
    assert "jaxlib 0.12.0.1" in text and ">= 4096 rows" in text
    assert "XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce" in text


def test_newer_jax_warns_but_works():
    report = doctor.assess(facts(packages__jax="0.13.1", packages__jaxlib="0.13.1"))
    assert report.ok
    assert "jax-untested" in [p.id for p, _ in report.warnings]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"packages__jax": None}, "jax is not installed"),
        ({"packages__jax": "0.11.2"}, "jax 0.11.2 is too old"),
        ({"packages__jaxlib": None}, "jaxlib is not installed"),
        ({"packages__cookiecutter": None}, "cookiecutter is not installed"),
        ({"python": "3.11.9"}, "Python 3.11.9 is too old"),
        ({"jax": {"ok": False, "error": "ImportError: boom"}}, "jax does not import: ImportError"),
        ({"templates_problem": "the template for pallas is missing"}, "template for pallas"),
    ],
)
def test_fatal_problems(changes, message):
    report = doctor.assess(facts(**changes))
    assert not report.ok
    assert any(message in problem for problem in report.fatal), report.fatal
    text = doctor.render(report)
    assert "The kit cannot work here:" in text and message in text


def test_broken_jax_marks_every_rung_as_cannot():
    report = doctor.assess(facts(jax={"ok": False, "error": "RuntimeError: no backend"}))
    assert {s for _, _, s, _ in report.rungs} == {doctor.CANNOT}
    assert "backend     unknown: RuntimeError: no backend" in doctor.render(report)


def test_only_a_fatal_problem_makes_the_command_fail(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "gather", lambda: facts(packages__cookiecutter=None))
    assert cli.main(["doctor"]) == 1
    assert "cookiecutter is not installed" in capsys.readouterr().out
    monkeypatch.setattr(doctor, "gather", lambda: facts(packages__flatbuffers=None))
    assert cli.main(["doctor"]) == 0


def test_jax_jaxlib_skew_and_plugin_skew():
    f = facts(
        packages__jaxlib="0.11.2",
        plugins={"jax-cuda12-plugin": "0.11.2", "jax-cuda12-pjrt": "0.12.0.1", "libtpu": "0.0.9"},
    )
    assert "jax-jaxlib-skew" in warning_ids(f)
    text = doctor.render(doctor.assess(f))
    assert "plugins: jax-cuda12-pjrt 0.12.0.1" in text
    assert "libtpu" not in text.split("plugins:")[-1]
    assert "plugin-skew" not in warning_ids(facts(plugins={"jax-cuda12-plugin": "0.12.0.1"}))


def test_export_without_flatbuffers_only_lowers():
    f = facts(packages__flatbuffers=None)
    assert status(f, "export")[0] == doctor.LOWER_ONLY
    assert "no-flatbuffers" in warning_ids(f)
    assert status(facts(), "export")[0] == doctor.RUNS


def gpu(cc):
    return {
        "cpu": BASE["jax"]["backends"]["cpu"],
        "gpu": [{"kind": "H100", "id": 0, "compute_capability": cc}],
    }


def test_pallas_status_by_backend():
    assert status(facts(), "pallas")[0] == doctor.INTERPRET_ONLY
    tpu = {"tpu": [{"kind": "TPU v5 lite", "id": 0, "compute_capability": None}]}
    assert status(facts(jax__backends=tpu), "pallas") == (doctor.RUNS, "TPU (Mosaic)")
    hopper = status(facts(jax__backends=gpu("9.0")), "pallas")
    assert hopper[0] == doctor.RUNS and "Mosaic GPU" in hopper[1]
    ampere = status(facts(jax__backends=gpu("8.0")), "pallas")
    assert ampere[0] == doctor.RUNS and "Triton (deprecated) only" in ampere[1]
    assert "pallas-triton" in warning_ids(facts(jax__backends=gpu("8.0")))
    assert "pallas-triton" not in warning_ids(facts())


def test_ffi_status_by_tools():
    s, why = status(facts(), "ffi")
    assert s == doctor.RUNS and "CUDA handler: needs nvcc" in why
    nvcc = {"path": "/usr/local/bin/nvcc", "version": "13.0"}
    assert "nvcc found, no GPU to run it" in status(facts(tools__nvcc=nvcc), "ffi")[1]
    on_gpu = status(facts(tools__nvcc=nvcc, jax__backends=gpu("9.0")), "ffi")[1]
    assert on_gpu.endswith("CUDA handler: nvcc and a GPU")
    no_cxx = facts(**{"tools__c++": None, "tools__g++": None})
    assert status(no_cxx, "ffi") == (doctor.CANNOT, "needs a C++ compiler")
    old = facts(tools__cmake={"path": "/usr/bin/cmake", "version": "3.10.2"})
    assert status(old, "ffi") == (doctor.CANNOT, "needs CMake >= 3.18 (found 3.10.2)")
    missing = facts(packages__nanobind=None, tools__cmake=None)
    assert status(missing, "ffi") == (doctor.CANNOT, "needs CMake, nanobind")


def test_sharding_rungs_mention_simulated_devices_on_one_device():
    assert "xla_force_host_platform_device_count" in status(facts(), "memory-and-sharding")[1]
    many = {"cpu": [{"kind": "cpu", "id": i, "compute_capability": None} for i in range(8)]}
    assert status(facts(jax__backends=many), "memory-and-sharding") == (doctor.RUNS, "8 devices")


def test_a_failing_backend_is_reported_not_raised():
    f = facts(jax__backends={"cpu": BASE["jax"]["backends"]["cpu"], "cuda": "no CUDA driver"})
    text = doctor.render(doctor.assess(f))
    assert "backend     cuda: failed: no CUDA driver" in text


@pytest.mark.parametrize(
    ("text", "version"),
    [("0.12.0.1", (0, 12, 0, 1)), ("0.13.0rc1", (0, 13, 0)), ("3.25.1", (3, 25, 1)), ("", ())],
)
def test_parse_version(text, version):
    assert doctor.parse_version(text) == version


def test_in_range_is_inclusive_and_pads():
    assert doctor.in_range("0.11.1", "0.11.1", "0.12.0.1")
    assert doctor.in_range("0.12", "0.11.1", "0.12.0.1")
    assert not doctor.in_range("0.12.1", "0.11.1", "0.12.0.1")
    assert doctor.in_range("9.9", None, None)
    assert not doctor.in_range(None, None, None)


def test_probe_failures_are_facts_not_tracebacks(monkeypatch):
    monkeypatch.setattr(doctor, "PROBE", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    assert doctor._probe_jax(30) == {"ok": False, "error": "the JAX probe crashed: boom"}
    monkeypatch.setattr(doctor, "PROBE", "import time; time.sleep(10)")
    result = doctor._probe_jax(0.5)
    assert result["ok"] is False and "more than" in result["error"]


def test_tool_versions(monkeypatch):
    assert doctor._tool("surely-not-a-real-tool-xyz") is None
    monkeypatch.setattr(doctor.shutil, "which", lambda name: sys.executable)
    info = doctor._tool("python")
    assert info["version"] == ".".join(map(str, sys.version_info[:3]))
