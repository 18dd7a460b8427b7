"""`jax-ladder doctor`: runs here and exits 0; the assessment (rung statuses,
known problems by version range, fatal problems) on made-up facts."""

import importlib.metadata as metadata
import json
import sys
import time
from dataclasses import replace

import pytest
from conftest import run_cli
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jax_ladder import __version__, cli, doctor, doctor_facts
from jax_ladder.doctor_facts import Device, Facts, JaxProbe, Tool
from jax_ladder.rungs import LADDER, by_name
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_SPEC

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
    assert "\nffi         needs a C++ compiler" in out
    for rung in LADDER:
        line = next(x for x in out.splitlines() if f" {rung.step}. {rung.name} " in x)
        assert any(f" {status} " in line for status in STATUSES), line
    assert "The kit works here" in out
    assert elapsed < 60  # typically 2 s; generous for a loaded CI machine


def test_doctor_json(tmp_path):
    result = run_cli("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True
    assert data["fatal"] == []
    assert [r["name"] for r in data["rungs"]] == [r.name for r in LADDER]
    assert {r["status"] for r in data["rungs"]} <= STATUSES
    assert data["facts"]["packages"]["jax"] == metadata.version("jax")
    assert "cpu" in data["facts"]["jax"]["backends"]


# -- the assessment on made-up facts ------------------------------------------------

CPU = [Device("cpu", 0)]
BASE = Facts(
    kit="0.1.0",
    python="3.12.1",
    executable="/usr/bin/python3",
    packages={
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
    plugins={},
    env={"XLA_FLAGS": None, "JAX_PLATFORMS": None},
    templates_problem=None,
    tools={
        "c++": Tool("/usr/bin/c++", "12.2.0"),
        "g++": Tool("/usr/bin/g++", "12.2.0"),
        "clang++": None,
        "cmake": Tool("/usr/bin/cmake", "3.25.1"),
        "nvcc": None,
    },
    jax=JaxProbe(
        ok=True,
        jax="0.12.0.1",
        jaxlib="0.12.0.1",
        backends={"cpu": CPU},
        default_backend="cpu",
        extend=True,
    ),
)


def facts(*, packages=(), tools=(), env=(), backends=None, **fields):
    """BASE with changes: `packages`, `tools` and `env` update BASE's mappings,
    `backends` replaces the probe's, other keywords replace fields of Facts."""
    changed = replace(
        BASE,
        packages={**BASE.packages, **dict(packages)},
        tools={**BASE.tools, **dict(tools)},
        env={**BASE.env, **dict(env)},
        **fields,
    )
    if backends is not None:
        changed = replace(changed, jax=replace(changed.jax, backends=backends))
    return changed


def warning_ids(f):
    return [finding.problem.id for finding in doctor.assess(f).warnings]


def verdict(f, rung):
    return next(r.verdict for r in doctor.assess(f).rungs if r.name == rung)


@pytest.mark.parametrize(
    ("jaxlib", "hit"),
    [
        ("0.10.2", False),
        ("0.11.0", False),
        ("0.11.1", True),
        ("0.11.2", True),
        ("0.12.0", True),
        ("0.12.0.1", True),
        ("0.12.1", True),  # measured 2026-12-06: still 99% of rows wrong
        ("0.12.2", False),
        ("0.13.0", False),
    ],
)
def test_ynn_miscompilation_warning_follows_the_jaxlib_range(jaxlib, hit):
    f = facts(packages={"jaxlib": jaxlib, "jax": jaxlib})
    assert ("xla-cpu-ynn-grad" in warning_ids(f)) == hit


def test_ynn_workaround_in_place_is_recognised():
    flag = "--xla_force_host_platform_device_count=8 " + doctor.YNN_FLAG
    report = doctor.assess(facts(env={"XLA_FLAGS": flag}))
    [finding] = [w for w in report.warnings if w.problem.id == "xla-cpu-ynn-grad"]
    assert finding.workaround_in_place
    text = doctor.render(report)
    assert "workaround in place: XLA_FLAGS=" in text
    assert "(0 warning(s))" in text


def test_the_installed_versions_get_the_ynn_warning_text():
    text = " ".join(doctor.render(doctor.assess(facts())).split())  # unwrapped
    assert "jaxlib 0.12.0.1" in text
    assert ">= 4096 rows" in text
    assert "XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce" in text


def test_newer_jax_warns_but_works():
    report = doctor.assess(facts(packages={"jax": "0.13.1", "jaxlib": "0.13.1"}))
    assert report.ok
    [finding] = [w for w in report.warnings if w.problem.id == "jax-untested"]
    assert finding.problem.workaround.command == f"pip install 'jax{JAX_SPEC}'"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"packages": {"jax": None}}, "jax is not installed"),
        ({"packages": {"jax": "0.9.2"}}, "jax 0.9.2 is too old"),
        # PEP 440 order, as pip's: a pre-release of 0.10.0 is below >=0.10.
        ({"packages": {"jax": "0.10.0rc1"}}, "jax 0.10.0rc1 is too old"),
        ({"packages": {"jaxlib": None}}, "jaxlib is not installed"),
        ({"packages": {"cookiecutter": None}}, "cookiecutter is not installed"),
        ({"python": "3.10.14"}, "Python 3.10.14 is too old"),
        (
            {"jax": JaxProbe(ok=False, error="ImportError: boom")},
            "jax does not import: ImportError",
        ),
        ({"templates_problem": "the template for pallas is missing"}, "template for pallas"),
    ],
)
def test_fatal_problems(changes, message):
    report = doctor.assess(facts(**changes))
    assert not report.ok
    assert any(message in problem for problem in report.fatal), report.fatal
    text = doctor.render(report)
    assert "The kit cannot work here:" in text
    assert message in text


def test_a_dev_build_inside_the_range_is_supported():
    report = doctor.assess(facts(packages={"jax": "0.12.1.dev20260101"}))
    assert report.ok
    assert "jax-untested" not in warning_ids(report.facts)


def test_broken_jax_marks_every_rung_as_cannot():
    report = doctor.assess(facts(jax=JaxProbe(ok=False, error="RuntimeError: no backend")))
    assert {r.verdict.status for r in report.rungs} == {doctor.CANNOT}
    assert "backend     unknown: RuntimeError: no backend" in doctor.render(report)


def test_only_a_fatal_problem_makes_the_command_fail(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "gather", lambda: facts(packages={"cookiecutter": None}))
    assert cli.main(["doctor"]) == 1
    assert "cookiecutter is not installed" in capsys.readouterr().out
    monkeypatch.setattr(doctor, "gather", lambda: facts(packages={"flatbuffers": None}))
    assert cli.main(["doctor"]) == 0


def test_jax_jaxlib_skew_and_plugin_skew():
    f = facts(
        packages={"jaxlib": "0.11.2"},
        plugins={"jax-cuda12-plugin": "0.11.2", "jax-cuda12-pjrt": "0.12.0.1", "libtpu": "0.0.9"},
    )
    assert "jax-jaxlib-skew" in warning_ids(f)
    text = doctor.render(doctor.assess(f))
    assert "plugins: jax-cuda12-pjrt 0.12.0.1" in text
    assert "libtpu" not in text.split("plugins:")[-1]
    assert "plugin-skew" not in warning_ids(facts(plugins={"jax-cuda12-plugin": "0.12.0.1"}))


def test_export_without_flatbuffers_only_lowers():
    f = facts(packages={"flatbuffers": None})
    assert verdict(f, "export").status == doctor.LOWER_ONLY
    assert "no-flatbuffers" in warning_ids(f)
    assert verdict(facts(), "export").status == doctor.RUNS


def gpu(cc):
    return {"cpu": CPU, "gpu": [Device("H100", 0, compute_capability=cc)]}


def test_pallas_status_by_backend():
    assert verdict(facts(), "pallas").status == doctor.INTERPRET_ONLY
    tpu = {"tpu": [Device("TPU v5 lite", 0)]}
    assert verdict(facts(backends=tpu), "pallas") == doctor.Verdict(doctor.RUNS, "TPU (Mosaic)")
    hopper = verdict(facts(backends=gpu("9.0")), "pallas")
    assert hopper.status == doctor.RUNS
    assert "Mosaic GPU" in hopper.why
    ampere = verdict(facts(backends=gpu("8.0")), "pallas")
    assert ampere.status == doctor.RUNS
    assert "Triton (deprecated) only" in ampere.why
    assert "pallas-triton" in warning_ids(facts(backends=gpu("8.0")))
    assert "pallas-triton" not in warning_ids(facts())


def test_ffi_status_by_tools():
    here = verdict(facts(), "ffi")
    assert here.status == doctor.RUNS
    assert "CUDA handler: needs nvcc" in here.why
    nvcc = Tool("/usr/local/bin/nvcc", "13.0")
    assert "nvcc found, no GPU to run it" in verdict(facts(tools={"nvcc": nvcc}), "ffi").why
    on_gpu = verdict(facts(tools={"nvcc": nvcc}, backends=gpu("9.0")), "ffi").why
    assert on_gpu.endswith("CUDA handler: nvcc and a GPU")
    no_cxx = facts(tools={"c++": None, "g++": None})
    assert verdict(no_cxx, "ffi") == doctor.Verdict(doctor.CANNOT, "needs a C++ compiler")
    old = facts(tools={"cmake": Tool("/usr/bin/cmake", "3.10.2")})
    assert verdict(old, "ffi") == doctor.Verdict(
        doctor.CANNOT, "needs CMake >= 3.18 (found 3.10.2)"
    )
    missing = facts(packages={"nanobind": None}, tools={"cmake": None})
    assert verdict(missing, "ffi") == doctor.Verdict(doctor.CANNOT, "needs CMake")
    # The build tools are no CANNOT: a project's `pip install .` gets them by build isolation.
    isolated = verdict(facts(packages={"nanobind": None, "scikit-build-core": None}), "ffi")
    assert isolated.status == doctor.RUNS
    assert isolated.why.endswith("; scikit-build-core, nanobind by build isolation")


def ffi_fact(f):
    """The doctor's `ffi` fact, unwrapped."""
    return " ".join(" ".join(doctor.render_ffi_build(doctor.ffi_build(f))).split())


def test_the_ffi_fact_says_what_a_build_needs_and_what_is_here():
    """What building the ffi rung's project needs (a C++ compiler, CMake >= 3.18,
    nanobind and scikit-build-core), what of it is here, and where the two
    Python build tools come from when they are not: build isolation, or the
    kit's `ffi` extra for the demo's in-place build."""
    here = ffi_fact(facts())
    assert here.startswith("ffi needs a C++ compiler (c++ found) and CMake >= 3.18 (3.25.1); ")
    assert here.endswith(
        "nanobind and scikit-build-core: installed, for in-place builds "
        "(jax-ladder demo, --no-build-isolation)"
    )
    bare = facts(
        packages={"nanobind": None, "scikit-build-core": None},
        tools={"c++": None, "g++": None, "cmake": Tool("/usr/bin/cmake", "3.10.2")},
    )
    text = ffi_fact(bare)
    assert "a C++ compiler (none found) and CMake >= 3.18 (3.10.2: too old)" in text
    assert "scikit-build-core and nanobind not installed, so only isolated builds" in text
    assert text.endswith("need pip install 'scikit-build-core>=0.11' 'nanobind>=2.4'")
    assert "(not found)" in ffi_fact(facts(tools={"cmake": None}))
    # Wrapped like the other facts: under the label column, the report's width.
    lines = doctor.render_ffi_build(doctor.ffi_build(bare))
    assert len(lines) > 1
    assert all(len(line) <= doctor_facts.WIDTH for line in lines)
    assert all(line.startswith(" " * doctor_facts.LABEL) for line in lines[1:])
    assert "--no-build-isolation" in " ".join(lines)  # never broken at its hyphens
    # Shown with the facts, and in the JSON form.
    assert "\nffi         needs a C++ compiler" in doctor.render(doctor.assess(bare))
    assert doctor.to_json(doctor.assess(bare))["ffi_build"] == {
        "compiler": None,
        "cmake": "3.10.2",
        "cmake_ok": False,
        "build_tools": {"scikit-build-core": None, "nanobind": None},
        "in_place": False,
    }
    assert doctor.to_json(doctor.assess(facts()))["ffi_build"]["in_place"] is True


def test_sharding_rungs_mention_simulated_devices_on_one_device():
    assert "xla_force_host_platform_device_count" in verdict(facts(), "memory-and-sharding").why
    many = {"cpu": [Device("cpu", i) for i in range(8)]}
    assert verdict(facts(backends=many), "memory-and-sharding") == doctor.Verdict(
        doctor.RUNS, "8 devices"
    )


def test_every_rung_of_the_ladder_has_its_own_check():
    assert set(doctor.RUNG_CHECKS) == {rung.name for rung in LADDER}


def test_a_failing_backend_is_reported_not_raised():
    f = facts(backends={"cpu": CPU, "cuda": "no CUDA driver"})
    text = doctor.render(doctor.assess(f))
    assert "backend     cuda: failed: no CUDA driver" in text


@pytest.mark.parametrize(
    ("text", "release"),
    [("0.12.0.1", (0, 12, 0, 1)), ("0.13.0rc1", (0, 13, 0)), ("3.25.1", (3, 25, 1))],
)
def test_version(text, release):
    assert doctor_facts.version(text).release == release


@pytest.mark.parametrize("text", ["", None, "not a version"])
def test_no_version(text):
    assert doctor_facts.version(text) is None


def test_within_is_inclusive_and_pads():
    ynn = SpecifierSet(">=0.11.1,<=0.12.0.1")
    assert doctor_facts.within("0.11.1", ynn)
    assert doctor_facts.within("0.12", ynn)
    assert not doctor_facts.within("0.12.1", ynn)
    assert doctor_facts.within("9.9", SpecifierSet(""))
    assert not doctor_facts.within(None, SpecifierSet(""))
    assert doctor_facts.version("0.12") == Version("0.12.0")


def test_the_json_form_leaves_out_what_the_probe_never_found():
    assert JaxProbe.from_json(BASE.jax.to_json()) == BASE.jax
    assert JaxProbe(ok=False, error="boom").to_json() == {"ok": False, "error": "boom"}
    assert Tool("/usr/bin/c++", "12.2.0").to_json() == {"path": "/usr/bin/c++", "version": "12.2.0"}
    assert BASE.to_json()["tools"]["clang++"] is None


def test_probe_failures_are_facts_not_tracebacks(monkeypatch):
    crash = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    monkeypatch.setattr(doctor_facts, "PROBE", crash)
    assert doctor_facts._probe_jax(30) == JaxProbe(ok=False, error="the JAX probe crashed: boom")
    monkeypatch.setattr(doctor_facts, "PROBE", "import time; time.sleep(10)")
    result = doctor_facts._probe_jax(0.5)
    assert result.ok is False
    assert "more than" in result.error


def test_tool_versions(monkeypatch):
    assert doctor_facts._tool("surely-not-a-real-tool-xyz") is None
    monkeypatch.setattr(doctor_facts.shutil, "which", lambda name: sys.executable)
    info = doctor_facts._tool("python")
    assert info.version == ".".join(map(str, sys.version_info[:3]))


def test_inside_a_generated_project_the_doctor_reports_it(tmp_path):
    """Its rung, options, the kit version that generated it, and its JAX pin
    against the installed JAX; from any folder inside the project."""
    project = scaffold(by_name("custom-vjp"), tmp_path, {"rule": "jvp"})
    result = run_cli("doctor", cwd=project / "src")
    assert result.returncode == 0, result.stderr
    section = result.stdout[result.stdout.index("This project") :]
    assert f"This project ({project}):" in section
    assert "rung      custom-vjp" in section
    assert "rule=jvp" in section
    assert f"kit       generated by jax-ladder {__version__}" in section
    jax = metadata.version("jax")
    assert f"installed jax {jax}: inside the pin" in section

    pyproject = project / "pyproject.toml"
    outside = ">=" + "99"  # (spelt so the kit's own range check does not read it as a pin)
    pyproject.write_text(pyproject.read_text().replace(f"jax{JAX_SPEC}", f"jax{outside}"))
    result = run_cli("doctor", "--json", cwd=project)
    data = json.loads(result.stdout)["project"]
    assert (data["rung"], data["jax_pin"], data["pin_holds"]) == ("custom-vjp", outside, False)
    assert data["options"]["rule"] == "jvp"
    assert "project" not in json.loads(run_cli("doctor", "--json", cwd=tmp_path).stdout)
