"""One name rule, templates/name_rules.py, for `jax-ladder new` and for plain
cookiecutter (every template's pre-gen hook): both accept and refuse exactly
the same project, package and op names."""

import os
import subprocess
import sys

import pytest
from conftest import REPO, assert_lint_clean, files_under

from jax_ladder import cli

# The pre-gen hooks are identical (test_shared_files.py): one will do.
RUNG = "custom-vjp"
CASES = [  # (option, value, accepted)
    ("project_name", "my-op", True),
    ("project_name", "My_Op2", True),
    ("project_name", "n" * 32, True),
    ("project_name", "n" * 33, False),
    ("project_name", "1st-op", False),
    ("project_name", "-op", False),
    ("project_name", "my op", False),
    ("project_name", "my.op", False),
    ("project_name", "café", False),  # project names are ASCII
    ("project_name", "", False),
    # Project names whose derived package name is refused:
    ("project_name", "class", False),  # keyword
    ("project_name", "match", False),  # soft keyword
    ("project_name", "type", False),  # soft keyword
    ("project_name", "JSON", False),  # standard library
    ("project_name", "ml-dtypes", False),  # jax's dependency
    ("project_name", "Tests", False),  # the projects' tests/ folder
    ("package_name", "my_op", True),
    ("package_name", "café", True),  # an identifier, imported under this name
    ("package_name", "ｊａｘ", False),  # imported as jax (NFKC)
    ("package_name", "p" * 32, True),
    ("package_name", "p" * 33, False),
    ("package_name", "my-op", False),
    ("package_name", "1op", False),
    ("package_name", "", False),
    ("package_name", "None", False),
    ("package_name", "_", False),  # soft keyword
    ("package_name", "os", False),
    ("package_name", "numpy", False),
    ("package_name", "opt_einsum", False),
    # The op's name: its module, functions, tests and FFI targets.
    ("op_name", "softmax", True),
    ("op_name", "log_sum_exp2", True),
    ("op_name", "o" * 32, True),
    ("op_name", "o" * 33, False),
    ("op_name", "Softmax", False),  # also a C++ macro prefix when upper-cased
    ("op_name", "soft-max", False),
    ("op_name", "2norm", False),
    ("op_name", "norm_", False),
    ("op_name", "", False),
    ("op_name", "lambda", False),
    ("op_name", "reference", False),  # the machinery's own module
    ("op_name", "test_op", False),  # pytest would collect it
    ("op_name", "math", False),
]


def plain_cookiecutter(output_dir, *extra, template=str(REPO), cwd=None, env=None):
    command = [sys.executable, "-m", "cookiecutter", template, "--directory", f"templates/{RUNG}"]
    command += ["--no-input", *extra]
    if output_dir is not None:
        command += ["--output-dir", str(output_dir)]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)


def jax_ladder_new(output_dir, assignment, capsys):
    status = cli.main(
        ["new", RUNG, "--no-input", "--output-dir", str(output_dir), "--set", assignment]
    )
    return status, capsys.readouterr().err


@pytest.mark.parametrize(("option", "value", "accepted"), CASES, ids=[repr(c[:2]) for c in CASES])
def test_kit_and_plain_cookiecutter_accept_the_same_names(
    tmp_path, capsys, option, value, accepted
):
    kit, plain = tmp_path / "kit", tmp_path / "plain"
    status, err = jax_ladder_new(kit, f"{option}={value}", capsys)
    result = plain_cookiecutter(plain, f"{option}={value}")
    if accepted:
        assert status == 0, err
        assert result.returncode == 0, result.stderr
        assert [p.name for p in kit.iterdir()] == [p.name for p in plain.iterdir()]
    else:
        # The kit refuses before rendering (2), never through the hook (1).
        assert status == 2, err
        assert err.startswith("jax-ladder: error: "), err
        assert len(err.strip().splitlines()) == 1, err
        assert result.returncode != 0
        assert result.stderr.startswith("error: "), result.stdout + result.stderr
        assert not kit.exists() or files_under(kit) == []
        assert not plain.exists() or files_under(plain) == []


def test_the_hook_says_why_in_the_rules_words(tmp_path):
    result = plain_cookiecutter(tmp_path, "package_name=ml_dtypes")
    assert "package name 'ml_dtypes' would shadow the module 'ml_dtypes'" in result.stderr
    assert "not a usable Python package name" in result.stderr


def test_the_hook_finds_the_rule_from_a_relative_template_path(tmp_path):
    """cookiecutter hands hooks the template's path as typed. Relative to the
    shell's directory (PWD), or to the output folder when -o is not given."""
    from_shell = dict(os.environ, PWD=str(REPO))
    result = plain_cookiecutter(
        tmp_path / "a", "package_name=json", template=".", cwd=REPO, env=from_shell
    )
    assert "would shadow the module 'json'" in result.stderr, result.stderr
    no_shell = {k: v for k, v in os.environ.items() if k != "PWD"}
    relative = os.path.relpath(REPO, tmp_path)
    result = plain_cookiecutter(None, template=relative, cwd=tmp_path, env=no_shell)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "safe-distances" / "src" / "safe_distances").is_dir()


def test_the_shared_rule_is_lint_clean():
    # It runs in the kit's process (jax_ladder.options), but lives in templates/,
    # which the kit's own lint configuration leaves out.
    assert_lint_clean(REPO, "templates/name_rules.py")


def test_the_op_name_rule_knows_every_machinery_module():
    """An op named like a module the project already has would overwrite it."""
    from jax_ladder.options import name_rules
    from jax_ladder.rungs import available, template_dir

    stems = set()
    for rung in available():
        project = template_dir(rung) / "{{cookiecutter.project_name}}"
        for folder in ("src/{{cookiecutter.package_name}}", "tests", "benchmarks"):
            stems |= {p.stem for p in (project / folder).glob("*.py")}
    machinery = {s for s in stems if not s.startswith(("_", "test_", "{{"))}
    assert machinery <= name_rules().MACHINERY_MODULES, machinery - name_rules().MACHINERY_MODULES
