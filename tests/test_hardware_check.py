"""scripts/hardware-check: its CPU mode (what CI can run), its rules, and its
machinery end to end on one check, so the script works when a GPU finally runs it."""

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import REPO, load_script

from jax_ladder.options import load_options, resolve
from jax_ladder.rungs import available, by_name, template_dir

SCRIPT = REPO / "scripts" / "hardware-check"


hw = load_script("hardware-check")


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
        # A test that probed this machine and found a facility missing (issue 49).
        ("test_two: missing facility: no TCP socket can be opened on the loopback", "tpu", True),
        ("missing facility: LeakSanitizer cannot run here: ...", "gpu", True),
        ("test_two: no TCP socket can be opened on the loopback", "tpu", False),  # no prefix
    ],
)
def test_only_skips_for_the_other_accelerator_are_allowed(reason, kind, allowed):
    assert hw.skip_is_allowed(reason, kind) is allowed


@pytest.mark.parametrize(
    ("reason", "version", "accepted"),
    [
        ("test_a: JAX 0.10's XLA:CPU drops optimization barriers", "0.10.2", True),
        ("test_b: jax 0.10.2 retires no serialization format", "0.10.2", True),
        ("test_b: jax 0.10.2 retires no serialization format", "0.12.0", False),
        ("test_c: JAX 0.100 is not out", "0.10.2", False),
        ("test_d: no golden artifact", "0.10.2", False),
        # A module that needs a newer release than the installed one (issue 51's TPU run).
        ("tests.test_hijax: HiJAX's HiPrim needs JAX 0.11 or newer", "0.10.2", True),
        ("tests.test_hijax: HiJAX's HiPrim needs JAX 0.11 or newer", "0.11.0", False),
        ("tests.test_hijax: HiJAX's HiPrim needs JAX 0.11 or newer", "0.12.1", False),
    ],
)
def test_a_skip_that_names_the_installed_jax_is_the_windows(reason, version, accepted):
    assert hw.names_this_jax(reason, version) is accepted


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

    def fake_run(command, cwd, env, timeout):
        calls.append((command, {"env": env}))
        return 0, ""

    monkeypatch.setattr(hw, "run_captured", fake_run)
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


def test_every_checks_tests_run_at_once_on_a_gpu(monkeypatch, tmp_path):
    """All checks' pytest processes run together: each waits here for all the others."""
    checks = [hw.Check(name, "example", example=name) for name in ("ffi", "ladder", "pallas")]
    together = threading.Barrier(len(checks), timeout=30)
    monkeypatch.setattr(hw, "build", lambda result, work: None)
    monkeypatch.setattr(hw, "run_tests", lambda result, kind: together.wait())
    results = hw.run_all(checks, "gpu", tmp_path, tmp_path)
    assert [r.note for r in results] == ["", "", ""]
    assert [r.check for r in results] == checks


def test_help_says_how_to_bring_the_missing_packages_without_a_network():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.replace("\\\n", " ").split())  # a shell's line continuation
    wanted = ["cookiecutter", "pytest>=9"]
    assert hw.wheels_download(wanted) in text
    assert hw.wheels_install(wanted) in text
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in text


def test_the_checks_that_compile_cpp_ask_for_its_build_tools():
    """A check with C++ to build needs nanobind and scikit-build-core in this Python (the
    projects build without isolation); without them hardware-check says what to install
    instead of reporting "build failed" (the TPU image lacked scikit-build-core)."""
    compiled = {c.label for c in hw.plan("tpu") if hw.compiles(c)}
    assert {"ffi", "internals", "examples/ffi", "examples/ladder"} <= compiled
    assert not {"pallas", "export", "examples/export"} & compiled
    assert set(hw.BUILD_NEEDED.values()) == {"nanobind", "scikit-build-core"}


def test_the_offline_wheels_are_for_the_oldest_python_the_kit_supports():
    """The advice fetches wheels for the TPU image's Python, the oldest one the kit and the
    templates declare, and pip itself accepts the command: with --platform and
    --python-version it resolves dependencies only when it may take nothing but wheels.
    (Run for real on 2026-12-06: 25 wheels, installed offline into a fresh 3.11 venv.)"""
    pip_cmdoptions = pytest.importorskip("pip._internal.cli.cmdoptions")
    from pip._internal.commands import create_command

    declared = re.search(
        r'requires-python = ">=([\d.]+)"', (REPO / "pyproject.toml").read_text()
    ).group(1)
    assert declared == hw.OFFLINE_PYTHON
    for rung in available():
        pyproject = (
            template_dir(rung) / "{{cookiecutter.project_name}}" / "pyproject.toml"
        ).read_text()
        assert f'requires-python = ">={declared}"' in pyproject, rung.name
    wanted = [
        dist for dist in hw.NEEDED.values() if dist.split(">")[0] in ("cookiecutter", "pytest")
    ]
    download = shlex.split(hw.wheels_download(wanted))
    assert download[:2] == ["pip", "download"]
    options, args = create_command("download").parse_args(download[2:])
    pip_cmdoptions.check_dist_restriction(options)  # raises if pip refuses the combination
    assert args == ["cookiecutter", "pytest>=9"]
    assert options.python_version == tuple(int(p) for p in declared.split("."))
    assert options.platforms == ["manylinux2014_x86_64"]
    assert options.implementation == "cp"
    install = shlex.split(hw.wheels_install(wanted))
    assert install[-2:] == args
    assert "--no-index" in install
    assert install[install.index("--find-links") + 1] == options.download_dir


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


def test_one_program_at_a_time_holds_a_tpu():
    """The one fact, per kind, that decides whether the checks' tests run at once."""
    assert hw.KINDS["gpu"].together is True
    assert hw.KINDS["tpu"].together is False


def test_on_a_tpu_each_checks_tests_run_alone_after_every_build(monkeypatch, tmp_path):
    checks = [hw.Check(name, "example", example=name) for name in ("ffi", "ladder", "pallas")]
    lock, running, events = threading.Lock(), [], []

    def fake_build(result, work):
        events.append(("build", result.check.example))

    def fake_tests(result, kind, timeout=None):
        with lock:
            running.append(result)
            assert len(running) == 1, "two checks' tests hold the TPU at once"
        events.append(("tests", result.check.example))
        assert timeout <= hw.KINDS["tpu"].test_timeout_s
        time.sleep(0.2)
        with lock:
            running.remove(result)

    monkeypatch.setattr(hw, "build", fake_build)
    monkeypatch.setattr(hw, "run_tests", fake_tests)
    results = hw.run_all(checks, "tpu", tmp_path, tmp_path, numbers=[12, 14, 16])
    assert [r.note for r in results] == ["", "", ""]
    assert [r.index for r in results] == [12, 14, 16]
    assert [e[0] for e in events] == ["build"] * 3 + ["tests"] * 3
    assert [e[1] for e in events[3:]] == ["ffi", "ladder", "pallas"]  # in the plan's order


def test_a_tpu_check_left_without_time_says_how_to_run_it(monkeypatch, tmp_path):
    monkeypatch.setattr(hw, "build", lambda result, work: None)
    monkeypatch.setattr(hw, "run_tests", lambda *args: pytest.fail("no time was left"))
    check = hw.Check("ffi", "example", example="ffi")
    late = time.perf_counter() - hw.KINDS["tpu"].budget_s
    (result,) = hw.run_all([check], "tpu", tmp_path, tmp_path, numbers=[12], start=late)
    assert result.note == "tests not run: the time budget is spent (run it with --only 12)"
    assert not result.ok


def test_builds_never_open_the_accelerator(monkeypatch, tmp_path):
    from jax_ladder import runner

    seen = {}

    def fake_build_project(project, target, config=(), env=None):
        seen.update(env)
        return 0, ""

    monkeypatch.setattr(runner, "build_project", fake_build_project)
    (tmp_path / "CMakeLists.txt").write_text("")
    result = hw.Result(hw.Check("ffi", "default"), project=tmp_path, log=tmp_path / "x")
    hw.build(result, tmp_path)
    assert seen["JAX_PLATFORMS"] == "cpu"


def test_the_tpu_sizes_fit_a_ten_minute_command():
    tpu = hw.KINDS["tpu"]
    # The last benchmark starts before the budget ends, and is interrupted by its end; a
    # minute is left for Python, the tarball and bringing the files back.
    assert tpu.budget_s + hw.INTERRUPT_GRACE_S <= 600 - 60
    assert tpu.test_timeout_s + hw.START_S <= tpu.budget_s


def test_only_takes_the_plans_numbers_and_labels():
    checks = hw.plan("tpu")
    pallas = [i for i, c in enumerate(checks) if c.label == "pallas"]
    ffi = checks.index(hw.Check("ffi", "example", example="ffi"))
    assert hw.select(checks, "3") == [3]
    assert hw.select(checks, f"examples/ffi,pallas,{pallas[0]}") == sorted([*pallas, ffi])
    assert hw.select(checks) == list(range(len(checks)))
    for wrong in ("99", "no-such-check"):
        with pytest.raises(ValueError, match="see --plan"):
            hw.select(checks, wrong)


@pytest.mark.parametrize("kind", ["gpu", "tpu"])
def test_the_parts_cover_the_plan_once_and_each_fits(kind):
    checks = hw.plan(kind)
    n = hw.parts_needed(list(range(len(checks))), checks, kind)
    if kind == "gpu":
        assert n == 1  # all at once
        return
    assert n > 1
    parts = [hw.select(checks, part=f"{k}/{n}", kind=kind) for k in range(1, n + 1)]
    assert sorted(i for part in parts for i in part) == list(range(len(checks)))
    room = hw.KINDS[kind].budget_s - hw.START_S
    for part in parts:
        assert sum(hw.estimate(checks[i], kind) for i in part) <= room
    with pytest.raises(ValueError, match="K/N"):
        hw.select(checks, part=f"{n + 1}/{n}")


def test_the_plan_is_numbered_and_says_how_many_parts():
    result = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), "--plan", "tpu", "--only", "0,examples/ffi"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^ +(\d+) ", result.stdout, flags=re.MULTILINE)
    assert listed == ["0", str(hw.select(hw.plan("tpu"), "examples/ffi")[0])]
    bare = [sys.executable, "-S", str(SCRIPT), "--plan", "tpu"]
    whole = subprocess.run(bare, capture_output=True, text=True)
    n = hw.parts_needed(list(range(len(hw.plan("tpu")))), hw.plan("tpu"), "tpu")
    assert f"--part 1/{n} ... --part {n}/{n}" in whole.stdout


@pytest.fixture
def sigint_reaches_children():
    """An xdist worker ignores SIGINT, and its children would inherit that: main()
    restores it first (hw.interruptible), as this does, until the test ends."""
    previous = signal.getsignal(signal.SIGINT)
    hw.interruptible()
    yield
    signal.signal(signal.SIGINT, previous)


def check_of_tests(tmp_path, tests):
    """Check 4 (custom-vjp, default) as hardware-check sees it, for a project whose only
    tests are the module `tests`."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_x.py").write_text(tests)
    check = hw.Check("custom-vjp", "default")
    return hw.Result(check, 4, project=project, code=project / "src", log=tmp_path / "04-x")


def test_timed_out_tests_report_their_counts_so_far_in_the_table(tmp_path, sigint_reaches_children):
    """pytest, interrupted at the timeout, still writes its report: the table says so."""
    result = check_of_tests(
        tmp_path,
        "import time, pytest\n"
        "def test_a(): pass\n"
        "def test_b(): pytest.skip('not here')\n"
        "def test_c(): time.sleep(120)\n",
    )
    # 20 s: time for pytest to start and run test_a and test_b on a loaded
    # 2-core runner (8 s was not, once), well short of test_c's sleep.
    start = time.perf_counter()
    hw.run_tests(result, "tpu", timeout=20)
    assert time.perf_counter() - start < 120  # cut short, not slept out
    note = "tests timed out after 20 s: so far 1 passed, 0 failed, 1 skipped"
    assert result.note == note
    assert not result.ok
    text = hw.table([result], ["hardware-check on tpu: TPU v5 lite"])
    row = next(line for line in text.splitlines() if "custom-vjp" in line)
    assert row.split()[:7] == ["4", "custom-vjp", "default", "FAILED", "1", "0", "1"]
    assert "      " + note in text
    assert "skipped on the hardware it needs: test_b: not here" in text


def test_an_xfail_the_project_declares_is_listed_and_accepted(tmp_path):
    """A test the project marks xfail on this machine (a known defect of its JAX) is not a
    skip on the hardware it needs: the check passes, and the table names it with its reason."""
    result = check_of_tests(
        tmp_path,
        "import pytest\n"
        "def test_a(): pass\n"
        "@pytest.mark.xfail(reason='the interpreter fails on this host', strict=True)\n"
        "def test_b(): assert False\n"
        "def test_c(): pytest.skip('needs a tpu')\n",
    )
    hw.run_tests(result, "tpu", timeout=120)
    assert result.expected_failures == ["test_b: the interpreter fails on this host"]
    assert result.bad_skips == ["test_c: needs a tpu"]
    text = hw.table([result], [])
    assert "expected to fail here (xfail): test_b: the interpreter fails on this host" in text
    result.bad_skips = []
    assert result.ok


def test_the_progress_lines_count_when_pytest_was_killed():
    output = "..F.s [ 40%]\nE..\n"
    assert hw.progress_counts(output) == {"passed": 5, "failed": 2, "skipped": 1}


def test_the_table_lists_the_accepted_facility_skips_and_a_failed_bench():
    result = hw.Result(
        hw.Check("ffi", "default"),
        7,
        passed=262,
        skipped=1,
        seconds=121.4,
        facility_skips=["test_x: missing facility: LeakSanitizer cannot run here: no ptrace"],
        speed="bench failed",
        bench_error="RuntimeError: boom",
        finished=True,
    )
    text = hw.table([result], [])
    assert result.ok
    assert " 7  ffi " in text
    assert " ok " in text
    assert "  121  bench failed" in text
    assert "skipped, this machine lacks it: test_x: missing facility: LeakSanitizer" in text
    assert "bench failed: RuntimeError: boom" in text


def test_the_templates_name_a_missing_facility_as_hardware_check_accepts_it():
    """The tests that probe this machine for a facility (sockets on the loopback,
    the sanitizers' runtime) skip with the prefix that skip_is_allowed accepts,
    and the conftest keeps such a skip a skip under REQUIRE_ACCELERATOR."""
    declared = {}
    sources = [*(REPO / "templates").glob("*/*/tests/*.py"), *(REPO / "src").rglob("*.py")]
    for path in sources:
        for value in re.findall(r'^MISSING_FACILITY = "(.*)"$', path.read_text(), re.MULTILINE):
            declared[path.relative_to(REPO).as_posix()] = value
    # One home, every project's tests/devices.py (templates/shared_files.py).
    assert declared == {"src/jax_ladder/opcheck/devices.py": hw.MISSING_FACILITY}


def test_this_python_holds_every_projects_test_extra():
    """The checks run each project uninstalled, so what its `test` extra brings must be in
    the Python that runs them: the TPU v5e run of 0.15.0 failed every export cell for want
    of flatbuffers and every plot test for want of matplotlib, and said nothing before."""
    needed = {dist.split(">")[0] for dist in hw.NEEDED.values()}
    for rung in available():
        text = (template_dir(rung) / "{{cookiecutter.project_name}}" / "pyproject.toml").read_text()
        # The dependency lines of every branch of the template's Jinja, read as written.
        lines = re.findall(r"^(?:dependencies|test) = \[(.*)\]$", text, re.M)
        assert lines, rung.name
        for requirement in re.findall(r'"([^"]+)"', " ".join(lines)):
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
            assert name in needed, f"{rung.name}'s {requirement!r} is not in NEEDED"
