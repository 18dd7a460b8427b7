"""Bake every option combination of every template and hold the result to the
bar: lint-clean, no Jinja left, its own tests pass against its oracle.

Baked projects run in this (shared) environment with src/ on the path;
test_wheels.py installs each default project's wheel into a new environment.
"""

import ast
import os
import re
import subprocess
import sys
import tomllib

import adapt
import mutation
import pytest
from conftest import (
    ALL_COMBINATIONS,
    REPO,
    TESTED_COMBINATIONS,
    assert_lint_clean,
    battery,
    covering_combinations,
    files_under,
    oldest_jax_combination,
    oldest_jax_path,
    option_combinations,
    selection,
)
from forked_pytest import ForkedPytest
from test_readme_samples import demo_sample_passed
from test_versions import newer_syntax

from jax_ladder.commands.demo import DEMO_SELECTION
from jax_ladder.options import MAX_NAME_LENGTH
from jax_ladder.rungs import available, template_dir
from jax_ladder.runner import build_project, needs_build, run_project_tests
from jax_ladder.scaffold import scaffold
from jax_ladder.versions import JAX_OLDEST

# Jinja left in output: the opening of {% ... %}, {# ... #}, or {{ ... }} that
# is not a GitHub Actions expression ${{ ... }}. (Closing tokens alone are
# legitimate Python: f"{x:.0%}".)
JINJA = re.compile(r"\{%|\{#|(?<!\$)\{\{|cookiecutter\.")


@pytest.fixture(scope="module", params=ALL_COMBINATIONS)
def baked(request, tmp_path_factory):
    rung, combo = request.param
    return scaffold(rung, tmp_path_factory.mktemp(rung.name), combo)


def test_no_jinja_left_in_generated_files(baked):
    # Runs first for each baked project, before its tests write caches.
    for relative in files_under(baked):
        if "__pycache__" in relative.parts or relative.parts[0] == "build":
            continue
        assert not JINJA.search(str(relative)), relative
        path = baked / relative
        if path.is_file() and b"\0" not in path.read_bytes():  # binary artifacts aside
            text = path.read_text()
            match = JINJA.search(text)
            assert match is None, (
                f"{relative}: {text[max(0, match.start() - 60) : match.end() + 60]!r}"
            )


def test_baked_project_is_lint_clean(baked):
    assert_lint_clean(baked)


def test_baked_python_parses_on_the_oldest_python(baked):
    # The project's requires-python admits PYTHON_OLDEST (test_versions.py):
    # every file must parse there, tests and benchmarks too, not only src/.
    problems = [
        f"{relative}: {why}"
        for relative in files_under(baked)
        if relative.suffix == ".py" and (why := newer_syntax((baked / relative).read_text()))
    ]
    assert problems == []


def test_a_python_subprocess_of_the_tests_says_where_it_runs(baked):
    """A test that starts Python (a JAX program) passes env=, as
    tests/devices.py's cpu_subprocess_env does: on a TPU the test run holds the
    chip, one program at a time may, and a subprocess that opens it fails."""
    bare = []
    for path in sorted((baked / "tests").glob("test_*.py")):
        for call in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "subprocess"
            ):
                continue
            starts_python = "sys.executable" in ast.unparse(call) or any(
                "sys.executable" in ast.unparse(node)
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Assign)
                and any(ast.unparse(a) in ast.unparse(call) for a in node.targets)
            )
            if starts_python and not any(k.arg == "env" for k in call.keywords):
                bare.append(f"{path.name}:{call.lineno}")
    assert not bare, f"a Python subprocess without env= (cpu_subprocess_env): {bare}"


def test_baked_project_has_the_promised_layout(baked):
    for required in (
        "README.md",
        "pyproject.toml",
        ".github/workflows/ci.yml",
        ".pre-commit-config.yaml",
        "benchmarks/bench.py",
        "tests",
    ):
        assert (baked / required).exists(), required
    package = next((baked / "src").iterdir())
    assert (package / "reference.py").is_file()


def test_every_generated_file_has_a_role_in_the_adapt_table(request, baked):
    # Runs early for each baked project, before its tests build anything.
    rung, combo = request.node.callspec.params["baked"]
    template = template_dir(rung)
    op = mutation.op_name_of(template, combo)
    entries = adapt.load(template)
    assert adapt.role_problems(baked, entries, combo, mutation.package_of(baked), op) == []


@pytest.fixture(scope="session")
def collector(tmp_path_factory):
    """One pytest server per worker for every combination's collection: JAX is
    imported once, each collection forks (tests/forked_pytest.py)."""
    runs = ForkedPytest(tmp_path_factory.mktemp("collect"), dict(os.environ))
    yield runs
    runs.close()


def test_its_tests_are_collected(request, baked, collector, tmp_path):
    """Every combination's test modules import and its tests are collected, the
    quick selection (`-m quick`) among them: the quick tier runs only the default
    combination's tests, the battery every covering combination's. A compiled
    project is built first (its CPU code: the CUDA handler's build is ffi's
    battery), as its tests import the extension."""
    code = baked / "src"
    if needs_build(baked):
        code = tmp_path / "site"
        status, output = build_project(baked, code, ("cmake.define.FFI_CUDA=OFF",))
        assert status == 0, output[-4000:]
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "quick"]
    status, output = collector.run(args, 300, cwd=baked, path=(str(code),))
    assert status == 0, output[-4000:]
    counts = re.search(r"^(\d+)/(\d+) tests collected", output, re.M)
    assert counts, output[-2000:]
    assert 0 < int(counts[1]) < int(counts[2]), counts[0]


def test_test_dependencies_include_what_jax_export_imports(baked):
    # The conformance matrix's export cells serialize, for which jax imports
    # flatbuffers without depending on it: a fresh environment with only the
    # project's declared test dependencies must have it (the kit's own
    # environment would hide its absence).
    pyproject = tomllib.loads((baked / "pyproject.toml").read_text())
    runtime = pyproject["project"]["dependencies"]  # the export rung needs it to run
    extra = pyproject["project"]["optional-dependencies"]["test"]
    group = pyproject["dependency-groups"]["test"]
    for declared in (runtime + extra, runtime + group):
        assert any(str(r).startswith("flatbuffers") for r in declared), declared


def plain_cookiecutter(template, output_dir, *extra):
    """The cookiecutter CLI on this repository, as a user with a clone runs it."""
    command = [sys.executable, "-m", "cookiecutter", str(REPO), "--directory", template]
    command += ["--no-input", "--output-dir", str(output_dir), *extra]
    return subprocess.run(command, capture_output=True, text=True)


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_plain_cookiecutter_from_a_clone(tmp_path, rung):
    result = plain_cookiecutter(f"templates/{rung.template}", tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list(tmp_path.iterdir())) == 1


def test_plain_cookiecutter_hook_rejects_a_bad_package_name(tmp_path):
    result = plain_cookiecutter("templates/custom-vjp", tmp_path, "package_name=json")
    assert result.returncode != 0
    assert "not a usable Python package name" in result.stdout + result.stderr


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_longest_allowed_name_is_still_lint_clean(tmp_path, rung):
    # Generated lines that contain the package name must fit the lint limit.
    name = "n" * MAX_NAME_LENGTH
    project = scaffold(rung, tmp_path, {"project_name": name})
    assert_lint_clean(project)


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_mutation_list_covers_every_category_and_combination(rung):
    mutations = mutation.load(template_dir(rung))
    assert mutation.combination_problems(mutations, list(option_combinations(rung))) == []
    # The suite runs each mutant once (mutation.spread), in a combination whose
    # tests it runs: every live one, and every such combination's tests kill some.
    tested = covering_combinations(rung)
    values = {f"{k}={v}" for combo in option_combinations(rung) for k, v in combo.items()}
    assert set(mutations.oldest_jax_avoids) <= values, mutations.oldest_jax_avoids
    oldest = frozenset({tested.index(oldest_jax_combination(rung))})
    chosen = mutation.spread(mutations, tested, oldest)
    assert set(chosen) == {m.name for m in mutations.mutants if not m.survives}
    assert set(chosen.values()) == set(range(len(tested)))


@pytest.mark.parametrize("baked", TESTED_COMBINATIONS, indirect=True)
def test_own_tests_pass_then_every_mutant_is_killed(request, baked, monkeypatch):
    """The project's own tests pass against its oracle; then, for each mutant of
    its mutations.toml that mutation.spread gives this combination (every
    mutant runs in one combination it applies to), they fail. Combinations:
    a pairwise covering set (conftest.covering_combinations). The default
    combination runs in both tiers, its mutants only in its template's
    battery; the others only in the battery (tests/tiers.py).

    One test, so that one build (minutes for a CUDA bake) serves both and the
    baseline is known to pass before any mutant runs. (xdist's loadgroup cannot
    keep separate tests together here: pytest 9.2 ignores its node-id rewrite.)"""
    rung, combo = request.node.callspec.params["baked"]
    if combo == oldest_jax_combination(rung):
        # Build, tests and mutants under the window's oldest JAX (issue 28).
        oldest = str(oldest_jax_path())
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [oldest, os.environ.get("PYTHONPATH")]))
        )
        version = subprocess.run(
            [sys.executable, "-c", "import jax; print(jax.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert version == JAX_OLDEST, version
    built = mutation.Project(baked, mutation.op_name_of(template_dir(rung), combo))
    combinations = covering_combinations(rung)
    here = combinations.index(combo)
    # The conformance matrix runs whole in three combinations of each
    # template: the default, the first skeleton and the oldest-JAX pass (and
    # the benchmark's quick plot, which reads only the declaration, in them).
    # Every other combination runs its other tests, the README table's check
    # included, and the matrix's quick selection, one cell of each family (a
    # combination's own refusals and collectives are declared per option:
    # internals' lowering=ffi api=hijax failed a cell no default bake ran),
    # or only the tests its template's mutations.toml names under
    # [only_tests]. The whole matrix in each of the 50 combinations was most
    # of the full tier's time, past CI's budget (issue 66).
    mutations = mutation.load(template_dir(rung))
    only = mutations.tests_for(combo)
    skeleton = combo.get("example") == mutation.SKELETON
    first_skeleton = next(c for c in combinations if c.get("example") == mutation.SKELETON)
    whole = (combinations[0], first_skeleton, oldest_jax_combination(rung))
    plot = "tests/test_bench_plot.py"
    matrix = () if combo in whole else ("-m", "quick or not matrix", "--ignore", plot)
    if here == 0:
        # The default project: first the demo's selection, as `jax-ladder demo`
        # runs it (its count is the README's demo sample's), then the rest.
        quick = run_project_tests(baked, code=baked / "src", extra_args=DEMO_SELECTION)
        assert quick.ok, quick.output[-5000:]
        sample = demo_sample_passed()[rung.name]
        assert quick.passed == sample, (
            f"README.md's demo sample says {sample} passed for "
            f"{rung.name}, a run of its quick selection {quick.passed}: "
            "run scripts/readme-samples --only demo"
        )
        matrix = ("-m", "not quick")
    run = run_project_tests(baked, code=baked / "src", extra_args=only or matrix)
    assert run.ok, run.output[-5000:]
    if not only:  # (a selection may compare no numbers, e.g. ffi's CUDA build checks)
        assert run.worst_error is not None, "the project's tests did not report their oracle error"
        # The skeleton's TODOs, whose notes would reach the README's table,
        # are flagged at the end of every run until the user rewrites them.
        flagged = "TODO left in tests/op_spec.py" in run.output
        assert flagged == skeleton, run.output[-2000:]
        assert run.worst_fraction is not None
        assert run.worst_fraction <= 100

    oldest = frozenset({combinations.index(oldest_jax_combination(rung))})
    chosen = mutation.spread(mutations, combinations, oldest)
    mutants = [m for m in mutations.mutants if chosen.get(m.name) == here]
    if not selection(request.config).battery(rung.name):
        mutants = []  # the default combination outside its battery (tests/tiers.py)
    outcomes = [built.run_mutant(m) for m in mutants]
    built.close()
    killed = sum(o.killed for o in outcomes)
    seconds = sum(o.seconds for o in outcomes)
    request.node.user_properties.append(
        ("mutation", (request.node.callspec.id, killed, len(outcomes), seconds))
    )
    problems = [
        f"{o.mutant.name} ({o.mutant.breaks}): "
        + ("invalid: " if not o.valid else "survived: ")
        + o.detail
        for o in outcomes
        if not o.killed
    ]
    assert problems == [], "\n".join(problems)


# What a generated README says of the project it sits in (issue 48: a README
# named a test file its project lacked and miscounted the files that are the
# user's). A path in backticks is a file of this project, unless the README
# says it may be absent ("when present", "if present").
README_PATH = re.compile(
    r"`((?:tests|src|benchmarks|docs|csrc|tools)/[^`\s*<>]+\.(?:py|cc|h|cu|md|svg|json|sh))`"
    r"(?!,? (?:when|if) present)"
)
COUNTED = re.compile(r"\b(two|three|four|five|six) files\b")
WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_the_readme_names_only_files_the_project_has(baked):
    readme = (baked / "README.md").read_text()
    assert sorted({p for p in README_PATH.findall(readme) if not (baked / p).exists()}) == []


def test_the_readme_counts_the_files_that_make_the_op(request, baked):
    """Every "N files" the README says is the adapt table's count of the files
    that are the user's: yours and the declaration."""
    rung, combo = request.node.callspec.params["baked"]
    template = template_dir(rung)
    entries, op = adapt.load(template), mutation.op_name_of(template, combo)
    package = mutation.package_of(baked)
    roles = [adapt.role_of(f, entries, combo, package, op) for f in adapt.generated_files(baked)]
    theirs = sum(1 for e in roles if e is not None and e.role in ("yours", "declaration"))
    said = {WORDS[w] for w in COUNTED.findall((baked / "README.md").read_text())}
    assert said <= {theirs}, f"the README says {sorted(said)} files; the adapt table has {theirs}"


# The templates whose README shows the worked example's own extra_collectives
# (issue 59: pallas showed a row reduction over n, which its matmul never gathers).
OWN_COLLECTIVES = ("pallas",)


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_the_readmes_collectives_example_is_what_the_matrix_reads(tmp_path, rung):
    """The README's extra_collectives example builds with the project's own
    conformance module (issue 48: no README said how to declare communication)."""
    project = scaffold(rung, tmp_path, {})
    readme = (project / "README.md").read_text()
    section = readme.split("### Communication", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    check = (
        f"{example}\nassert all(isinstance(c, Collectives) for c in extra_collectives.values())\n"
    )
    if rung.name in OWN_COLLECTIVES:
        # The example is the project's own declaration, whose counts the cells check.
        check += (
            "from op_spec import SPEC\n"
            "assert extra_collectives == dict(SPEC.extra_collectives), "
            "(extra_collectives, SPEC.extra_collectives)\n"
        )
    src = str(project / "src")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": src}
    result = subprocess.run(
        [sys.executable, "-c", check],
        cwd=project / "tests",
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]


# The environment warnings of accelerators' runtimes that a generated project's
# `filterwarnings = ["error"]` lets pass, by exact message (issue 49: on a TPU
# v5e VM, `import jax` warned and every project collected 0 tests).
RUNTIME_WARNINGS = {
    "tpu": "Transparent hugepages are not enabled. TPU runtime startup and shutdown time "
    "should be significantly improved on TPU v5e and newer.",
}
WARNS = """import warnings

def test_a_runtime_warning():
    warnings.warn({message!r}, UserWarning)
"""


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_an_accelerator_runtimes_warning_does_not_stop_the_tests(tmp_path, rung):
    project = scaffold(rung, tmp_path, {})
    cases = {**RUNTIME_WARNINGS, "other": "any other warning of the project's own"}
    for name, message in cases.items():
        (project / "tests" / f"test_warns_{name}.py").write_text(WARNS.format(message=message))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "runtime_warning"]
    run = subprocess.run(
        [*args, "tests/test_warns_tpu.py", "tests/test_warns_other.py"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project / "src"), "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
    )
    assert "1 failed, 1 passed" in run.stdout, run.stdout[-3000:]
    assert "test_warns_other.py" in run.stdout.split("short test summary")[-1]


@pytest.mark.parametrize(
    "rung",
    [pytest.param(r, marks=battery(r), id=r.name) for r in available()],
)
def test_the_readmes_support_table_is_the_same_on_the_oldest_jax(tmp_path, rung):
    """A declaration may depend on the JAX that runs it (custom-vjp's counts on
    JAX 0.10), its README's table may not: the default project's table test
    passes under the window's oldest JAX too (0.14.0's custom-vjp failed it
    there, and the oldest-JAX pass, which runs another combination, never saw
    it). A compiled project is left out: the release path runs its whole suite
    on the oldest JAX (tests/test_release_steps.py)."""
    project = scaffold(rung, tmp_path, {})
    if needs_build(project):
        pytest.skip("compiled: the release path's oldest-JAX run covers it")
    path = os.pathsep.join([str(oldest_jax_path()), str(project / "src")])
    test = "tests/test_conformance.py::test_readme_support_table_is_current"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=project,
        env={**os.environ, "PYTHONPATH": path, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-3000:]
