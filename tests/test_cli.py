"""The CLI as a user meets it: list, new (good and bad input), prompts."""

import os
import re
import subprocess
import sys
import threading

import pytest
from conftest import assert_usage_error, files_under, run_cli
from packaging.specifiers import SpecifierSet

from jax_ladder import cli, pythons
from jax_ladder.commands import _common, demo
from jax_ladder.options import load_options, resolve
from jax_ladder.rungs import LADDER, available, by_name, template_dir
from jax_ladder.runner import TestRun as Run  # not collected as a test class
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import PYTHON_OLDEST


def test_list_shows_all_nine_rungs_and_marks_templates(tmp_path):
    result = run_cli("list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for rung in LADDER:
        assert f"{rung.step}. {rung.name}" in result.stdout
        if rung.template:
            assert f"* {rung.step}. {rung.name}" in result.stdout
            assert f"jax-ladder new {rung.name}" in result.stdout
    assert len(LADDER) == 9


def test_templates_are_inside_the_installed_package():
    # The kit's tests run against the installed wheel, not the source tree.
    path = template_dir(by_name("custom-vjp"))
    assert "site-packages" in str(path), path
    assert (path / "cookiecutter.json").is_file()


@pytest.mark.parametrize("rung", ["internals", "custom-vjp"])
def test_new_says_how_to_name_the_op_before_anything_is_edited(tmp_path, capsys, rung):
    """The op's name is in its files, functions and tests: naming it is a new bake,
    which `new` says when the user took the example's name without choosing it."""
    out = tmp_path / "out"
    assert cli.main(["new", rung, "--no-input", "--name", "mine", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    op = resolve(load_options(template_dir(by_name(rung))), {})["op_name"]
    said = f"The op is named {op!r} (the example's name)."
    assert said in printed, printed
    assert f"jax-ladder new {rung} --name mine --set op_name=NAME" in printed, printed
    assert printed.index(said) < printed.index("'Adapt it' table"), printed
    chosen = ["--set", "op_name=my_norm", "--output-dir", str(tmp_path / "named")]
    assert cli.main(["new", rung, "--no-input", *chosen]) == 0
    assert "--set op_name=NAME" not in capsys.readouterr().out


def test_new_with_defaults_prints_next_steps(tmp_path):
    result = run_cli("new", "custom-vjp", "--no-input", "--output-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = tmp_path / "safe-distances"
    assert (project / "src" / "safe_distances" / "pairwise_distances.py").is_file()
    steps = (
        f"cd {project}",
        "git init",
        "-m venv .venv && . .venv/bin/activate",
        # pip 23.2, which Python 3.11 and 3.12.1 bundle, spends minutes resolving
        # a project's dependencies on a Python its requires-python refuses, then
        # fails without naming the Python; a current one refuses it at once.
        "python -m pip install --upgrade pip",
        "pip install -e '.[test]'",
        "python -m pytest",
        "benchmarks/bench.py",
    )
    listed = result.stdout.split("Next steps:")[1]
    at = [listed.find(step) for step in steps]
    assert -1 not in at, result.stdout
    assert at == sorted(at), result.stdout


def test_new_says_a_hijax_project_needs_jax_0_11_and_python_3_12(tmp_path):
    # JAX 0.11, which HiPrim needs, has no wheels for Python 3.11: the venv
    # step must use a newer Python, and say why.
    from jax_ladder.versions import HIJAX_JAX_OLDEST, HIJAX_PYTHON_OLDEST

    args = ("new", "internals", "--no-input", "--set", "api=hijax", "--output-dir", str(tmp_path))
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("Next steps:")[1]
    said = f"needs JAX {HIJAX_JAX_OLDEST} or newer"
    assert said in listed, listed
    assert f"Python {HIJAX_PYTHON_OLDEST} or newer" in listed, listed
    venv = next(line for line in listed.splitlines() if "-m venv" in line)
    assert "python3.11 " not in venv, listed


def test_a_fresh_project_has_no_bytecode_caches(tmp_path, monkeypatch):
    """Neither the bytecode pip compiles inside the installed templates nor
    hooks that import the new package (export's writes its golden artifact)
    leave __pycache__/ behind, whatever the caller's environment."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    for rung in available():
        project = scaffold(rung, tmp_path / rung.name, {})
        assert [p.relative_to(project) for p in project.rglob("__pycache__")] == [], rung.name


def test_the_export_hook_finds_a_jax_that_pythonpath_provides(tmp_path):
    """A Python whose JAX comes from PYTHONPATH alone (a TPU VM's image puts it there):
    export's post-generation hook adds the new project's src/ to that path, not in its place,
    so the golden artifact is written."""
    base = getattr(sys, "_base_executable", sys.executable)
    bare = subprocess.run([base, "-c", "import jax"], capture_output=True)
    if base == sys.executable or bare.returncode == 0:
        pytest.skip("needs a Python without JAX of its own: run the kit's tests from its venv")
    packages = [p for p in sys.path if p.endswith("site-packages")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(packages))
    command = [base, "-m", "cookiecutter", str(template_dir(by_name("export"))), "--no-input"]
    result = subprocess.run(
        [*command, "-o", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "golden artifact was not written" not in result.stdout + result.stderr
    assert [p.name for p in tmp_path.glob("*/tests/golden/*.jax")] == ["model.jax"]


def fake_python(folder, name, version):
    """An executable `name` in `folder` that answers every question with `version`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def test_the_venv_step_names_a_python_the_project_allows(tmp_path, monkeypatch, capsys):
    """A default `python` older than a project allows (3.10 for >=3.12, and
    for the templates' >=3.11) cannot install it: the next steps make the venv
    with a Python that fits, found on the PATH, else among pyenv's installed
    versions, else they say which version to install."""
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    needs = SpecifierSet(">=3.12")
    fake_python(bin_dir, "python3", "3.10.14")
    fake_python(bin_dir, "python", "3.10.14")
    fake_python(bin_dir, "python3.12", "")  # a pyenv shim for an unselected version fails
    assert pythons.find_python(needs) is None
    installed = fake_python(pyenv / "versions" / "3.13.0" / "bin", "python3", "3.13.0")
    assert pythons.find_python(needs) == str(installed)
    fake_python(bin_dir, "python3.13", "3.13.0")
    assert pythons.find_python(needs) == "python3.13"
    fake_python(bin_dir, "python3", "3.12.4")
    assert pythons.find_python(needs) == "python3"

    (bin_dir / "python3").unlink()
    (bin_dir / "python3.13").unlink()
    installed.unlink()
    assert cli.main(["new", "custom-vjp", "--no-input", "--output-dir", str(tmp_path)]) == 0
    steps = capsys.readouterr().out
    assert f"it needs Python >={PYTHON_OLDEST}, and none was found here: install one, then" in steps
    assert f"  python{PYTHON_OLDEST} -m venv .venv && . .venv/bin/activate\n" in steps
    assert steps.index("-m venv") < steps.index("pip install")


BAKES = [pytest.param(r, {}, id=r.name) for r in available()]
BAKES.append(pytest.param(by_name("internals"), {"api": "hijax"}, id="internals-hijax"))


@pytest.mark.parametrize(("rung", "answers"), BAKES)
def test_the_next_steps_say_which_jax_the_chosen_python_gets(tmp_path, monkeypatch, rung, answers):
    """JAX 0.11 and newer have no wheels for Python 3.11, where pip quietly
    installs the window's oldest minor: every template's next steps say which
    JAX the Python they name gets, and what the other Pythons get."""
    from jax_ladder.commands.new import next_steps
    from jax_ladder.versions import JAX_NEWEST_MINOR, JAX_ON_PYTHON_OLDEST

    project = scaffold(rung, tmp_path / "project", answers)
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    hijax = not pythons.jax_requirement(project).contains(JAX_ON_PYTHON_OLDEST.replace("x", "0"))
    for version, gets in (("3.11.9", JAX_ON_PYTHON_OLDEST), ("3.13.2", JAX_NEWEST_MINOR)):
        fake_python(bin_dir, "python3", version)
        steps = next_steps(project)
        if hijax and version == "3.11.9":  # refused: no Python found
            assert not any(s.startswith("python3 -m venv") for s in steps), steps
            continue
        said = f"# python3 is Python {version}: it gets JAX {gets}"
        (line,) = [s for s in steps if s.startswith(said)] or [steps]
        assert steps.index(line) < next(i for i, s in enumerate(steps) if "-m venv" in s)
        if not hijax:
            others = f"(Python {PYTHON_OLDEST} gets JAX {JAX_ON_PYTHON_OLDEST} only, "
            assert others in line, line
    # Where both are here, the steps name the Python that gets the newest JAX.
    fake_python(bin_dir, "python3", "3.11.9")
    fake_python(bin_dir, "python3.13", "3.13.2")
    steps = next_steps(project)
    assert f"# python3.13 is Python 3.13.2: it gets JAX {JAX_NEWEST_MINOR}" in "\n".join(steps)
    assert "python3.13 -m venv .venv && . .venv/bin/activate" in steps
    (bin_dir / "python3.13").unlink()
    (bin_dir / "python3").unlink()
    steps = next_steps(project)  # none found: what each Python would get
    (said,) = [s for s in steps if s.startswith("# Python ")] or [steps]
    assert JAX_NEWEST_MINOR in said, said
    assert hijax or f"Python {PYTHON_OLDEST} gets JAX {JAX_ON_PYTHON_OLDEST} only" in said, said


def test_new_rung_help_lists_that_templates_options(tmp_path, capsys, monkeypatch):
    """`new RUNG --help`: the template's options from its cookiecutter.json, each
    with its choices and default; the derived ones only named; nothing written."""
    monkeypatch.chdir(tmp_path)
    for rung in available():
        assert cli.main(["new", rung.name, "--help"]) == 0
        out = capsys.readouterr().out
        text = " ".join(out.split())  # as wrapped for any terminal width
        assert "jax-ladder new [-h]" in out, out
        assert f"rung {rung.step}, {rung.name}" in text, out
        for option in ("--name", "--output-dir", "--no-input", "--set KEY=VALUE"):
            assert option in out, out
        options = load_options(template_dir(rung))
        for option in options.values():
            rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
            if option.derived:
                assert not any(row.startswith(f"{option.key}=") for row in rows), out
                assert option.key in text.split("unless set: ")[1], out
                continue
            values = "|".join(option.choices) if option.choices else "TEXT"
            assert f"{option.key}={values}" in rows, out
            default = option.choices[0] if option.choices else option.default
            assert f"{' '.join(option.prompt.split())}; default: {default}" in text, out
    assert files_under(tmp_path) == []


def test_new_help_without_a_rung_names_the_rungs_and_the_installed_command_agrees(tmp_path):
    result = run_cli("new", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "RUNG is one of: " + ", ".join(r.name for r in available()) in text
    assert "'jax-ladder new RUNG --help' lists them" in text
    result = run_cli("new", "custom-vjp", "-h", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "rule=vjp|jvp" in result.stdout
    assert files_under(tmp_path) == []


def test_new_without_a_terminal_takes_defaults(tmp_path):
    result = run_cli("new", "custom-vjp", "--name", "my-op", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "my-op" / "src" / "my_op" / "reference.py").is_file()


def test_prompt_repeats_until_the_answer_is_valid(monkeypatch, capsys):
    option = load_options(template_dir(by_name("custom-vjp")))["rule"]
    answers = iter(["forward", "jvp"])
    monkeypatch.setattr("builtins.input", lambda _: next(answers))
    assert _common.ask_option(option, "vjp") == "jvp"
    assert "use one of: vjp, jvp" in capsys.readouterr().out


BAD_INPUT = [
    (["new", "nope"], "unknown rung 'nope'"),
    (["new", "transforms"], "no template for 'transforms'"),
    (["new", "custom-vjp", "--name", "1st-op"], "project name '1st-op' is invalid"),
    (["new", "custom-vjp", "--name", "my op"], "project name 'my op' is invalid"),
    (["new", "custom-vjp", "--name", "x" * 33], "use at most 32"),
    (["new", "custom-vjp", "--name", "class"], "'class' is a Python keyword"),
    (["new", "custom-vjp", "--name", "jax"], "would shadow the module 'jax'"),
    (["new", "custom-vjp", "--name", "numpy"], "would shadow the module 'numpy'"),
    (["new", "custom-vjp", "--name", "json"], "would shadow the module 'json'"),
    (["new", "custom-vjp", "--set", "package_name=my-pkg"], "'my-pkg' is not a Python identifier"),
    (["new", "custom-vjp", "--set", "colour=red"], "unknown option 'colour'"),
    (["new", "custom-vjp", "--set", "rule=backward"], "use one of: vjp, jvp"),
    (["new", "custom-vjp", "--set", "rule"], "--set expects KEY=VALUE"),
    (["new", "custom-vjp", "--bogus"], "unrecognized arguments: --bogus"),
    (["new"], "the following arguments are required: rung"),
    (["new", "nope", "--help"], "unknown rung 'nope'"),
    (["new", "transforms", "--help"], "no template for 'transforms'"),
    (["fly"], "invalid choice: 'fly'"),
    (["demo", "--rung", "plain-jax"], "the kit has no template for 'plain-jax'"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, args, message):
    assert_usage_error(args, message, tmp_path, capsys, monkeypatch)


def test_bad_input_through_the_installed_command(tmp_path):
    # The same contract once through the real entry point, as a user meets it.
    result = run_cli("new", "nope", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "jax-ladder: error: unknown rung 'nope'; choose one of: "
        + ", ".join(rung.name for rung in LADDER if rung.template)
    )
    assert files_under(tmp_path) == []


def test_existing_target_is_not_touched(tmp_path):
    existing = tmp_path / "safe-distances"
    existing.mkdir()
    (existing / "mine.txt").write_text("keep me")
    result = run_cli("new", "custom-vjp", "--no-input", cwd=tmp_path)
    assert result.returncode == 2
    assert "already exists" in result.stderr
    assert "--output-dir" in result.stderr
    assert files_under(tmp_path) == [
        existing.relative_to(tmp_path),
        (existing / "mine.txt").relative_to(tmp_path),
    ]
    assert (existing / "mine.txt").read_text() == "keep me"


def test_output_dir_that_is_a_file_is_rejected(tmp_path):
    (tmp_path / "file").write_text("x")
    result = run_cli("new", "custom-vjp", "--no-input", "--output-dir", "file", cwd=tmp_path)
    assert result.returncode == 2
    assert "is a file" in result.stderr
    assert files_under(tmp_path) == [tmp_path.joinpath("file").relative_to(tmp_path)]


def test_demo_runs_rungs_side_by_side_and_prints_a_table_in_ladder_order(tmp_path):
    # Two rungs (the two quickest), so two test runs share the pool: every
    # rung's default bake is already tested in test_templates.py through the
    # same runner, so the whole demo would only repeat that work. Named out of
    # ladder order: the table must put them back in it.
    result = run_cli(
        *("demo", "--rung", "internals", "--rung", "custom-partitioning"),
        *("--output-dir", str(tmp_path / "demo")),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "running tests" in result.stdout  # progress
    rows = [line for line in result.stdout.splitlines() if "% of tol" in line]
    assert [row.split()[0] for row in rows] == ["custom-partitioning", "internals"], rows
    assert all(" ok " in row for row in rows), rows
    lines = result.stdout.splitlines()
    (total,) = [line for line in lines if line.startswith("2 rung(s) in ")]
    # A first look: it says what ran and how to run a project's whole suite, in a
    # virtual environment of a Python that it names (the one `new` would name).
    hint = "\n".join(lines[lines.index(total) + 1 :])
    assert "quick selection (pytest -m quick" in hint, hint
    folder = re.escape(str(tmp_path / "demo" / "custom-partitioning"))
    assert re.search(rf"^  cd {folder}/\S+$", hint, re.M), hint
    assert " -m venv .venv && . .venv/bin/activate\n" in hint, hint
    assert re.search(r"# \S+ is Python 3\.\d+\.\d+: it gets JAX ", hint), hint
    assert hint.endswith("  python -m pytest"), hint


class _FakeProjects:
    """Stands in for scaffolding and for the projects' test runs, recording
    the order runs start in and how many run at once."""

    def __init__(self, out, compiled, failing=frozenset(), together=1):
        self.out, self.compiled, self.failing = out, compiled, failing
        self.started: list[str] = []
        # Every run waits here for the others: if the demo ran them one after
        # another, the barrier would time out and the run would fail.
        self.barrier = threading.Barrier(together, timeout=20) if together > 1 else None
        self.lock = threading.Lock()

    def scaffold(self, rung, target, answers):
        target.mkdir(parents=True)
        # What the demo's closing steps read (the Python and JAX the project allows).
        (target / "pyproject.toml").write_text(
            '[project]\nrequires-python = ">=3.11"\ndependencies = ["jax>=0.10,<0.13"]\n'
        )
        if rung.name in self.compiled:
            (target / "CMakeLists.txt").write_text("")
        return target

    def run_project_tests(self, project, echo=None, extra_args=()):
        assert extra_args == demo.DEMO_SELECTION  # a first look: the quick selection
        with self.lock:
            self.started.append(project.name)
        if self.barrier is not None:
            self.barrier.wait()
        ok = project.name not in self.failing
        output = "" if ok else f"{project.name}: 1 failed (the fake's output)"
        return Run(3, 0 if ok else 1, 0, 1e-7, 10.0, 0.1, 0 if ok else 1, output)


def _demo_in_process(monkeypatch, capsys, fake, cpus, *rungs):
    monkeypatch.setattr(demo, "scaffold", fake.scaffold)
    monkeypatch.setattr(demo, "run_project_tests", fake.run_project_tests)
    monkeypatch.setattr(demo.os, "cpu_count", lambda: cpus)
    args = [arg for rung in rungs for arg in ("--rung", rung)]
    code = cli.main(["demo", *args, "--output-dir", str(fake.out)])
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if "% of tol" in line]
    return code, out, rows


def test_demo_starts_compiled_rungs_first_and_tables_in_ladder_order(tmp_path, monkeypatch, capsys):
    # One at a time, so the finishing order is the starting order: the
    # compiled rung first, then the rest in ladder order; a repeated --rung
    # runs once.
    fake = _FakeProjects(tmp_path / "demo", compiled={"ffi"})
    code, out, rows = _demo_in_process(
        monkeypatch, capsys, fake, 1, "export", "ffi", "custom-vjp", "export"
    )
    assert code == 0, out
    assert fake.started == ["ffi", "custom-vjp", "export"]
    assert [row[0] for row in rows] == ["custom-vjp", "export", "ffi"], out
    assert "ffi: building and testing" in out
    assert "export: running tests in" in out
    assert any(line.startswith("3 rung(s) in") for line in out.splitlines()), out


def test_demo_runs_one_project_per_core_and_reports_a_failure(tmp_path, monkeypatch, capsys):
    fake = _FakeProjects(tmp_path / "demo", compiled=set(), failing={"export"}, together=3)
    code, out, rows = _demo_in_process(
        monkeypatch, capsys, fake, 3, "custom-vjp", "export", "custom-partitioning"
    )
    assert code == 1, out
    assert "3 at a time" in out
    assert {row[0]: row[1] for row in rows} == {
        "custom-vjp": "ok",
        "export": "FAILED",
        "custom-partitioning": "ok",
    }, out
    assert "export: 1 failed (the fake's output)" in out
