import contextlib
import importlib.machinery
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest
import tiers

from jax_ladder.options import REPOSITORY_OPTIONS, load_options
from jax_ladder.rungs import available, template_dir

REPO = Path(__file__).resolve().parents[1]


def load_script(name):
    """scripts/<name> (a Python script without a .py suffix) as a module, so
    that its tests call its functions."""
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(REPO / "scripts" / name))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader))
    sys.modules[module_name] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


# Bakes with a CUDA handler compile it (and recompile it for each C++ mutant)
# for one GPU architecture rather than the project's default, every major one:
# what the kit checks is that it compiles, and one architecture takes a third
# of the time. The generated CMakeLists.txt honours CMake's CUDAARCHS.
os.environ.setdefault("CUDAARCHS", "75")

# A persistent JAX compilation cache per xdist worker, for every process the
# worker starts (baked projects' tests, their mutants, the wheels'
# environment). Compiling dominates a baked project's test time, and most of
# what a mutant's run or another option combination compiles is the same
# program again: with a warm cache the custom-vjp project's tests took 14 s
# instead of 52 s, and filling the cache cost nothing measurable. The key is
# the program (debug locations stripped) and its compile options, so a
# mutated program never hits the original's entry. Every program is cached,
# however fast it compiles. One cache per worker, because JAX writes an entry
# in place: a process of another worker could read it half-written (JAX's
# file lock, which a size limit turns on, cost 75% more than no cache). The
# workers still share what they compiled: after each test a worker
# hard-links its new entries into a shared folder, and before each test it
# links in the shared ones it lacks. A link appears whole, and between two
# tests no process of the worker is compiling, so nothing is read half-written;
# the release path's tests then find the default projects' programs compiled
# by the worker that baked them (the same program from an installed wheel is
# the same key: the key has no file paths).
JAX_CACHE = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}
CACHE_ROOT = "JAX_LADDER_TEST_JAX_CACHES"


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="the full tier: every template's battery (tests/tiers.py), not only the changed ones'",
    )


def selection(config) -> tiers.Selection:
    """The tier's choice of batteries (tests/tiers.py), made once per process."""
    if not hasattr(config, "jax_ladder_selection"):
        templates = [rung.name for rung in available()]
        full = config.getoption("--full")
        config.jax_ladder_selection = tiers.select(REPO, templates, full)
    return config.jax_ladder_selection


def pytest_report_header(config):
    return selection(config).describe([rung.name for rung in available()])


def battery(rung=None):
    """Marks a test (or a parameter) as part of a template's battery: the quick
    tier runs it only where tests/tiers.py selects that template; without a
    rung, where it selects any (the test then narrows itself to those)."""
    return pytest.mark.battery(*([rung.name] if rung else []))


def pytest_configure(config):
    # Before xdist starts its workers, which inherit the environment; a cache
    # the caller chose is kept.
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:
        if "JAX_COMPILATION_CACHE_DIR" in os.environ:
            return
        config.jax_cache_root = os.environ[CACHE_ROOT] = tempfile.mkdtemp(prefix="jax-caches-")
    elif CACHE_ROOT not in os.environ:
        return
    cache = str(Path(os.environ[CACHE_ROOT], worker or "main"))
    os.environ.update(JAX_CACHE, JAX_COMPILATION_CACHE_DIR=cache)


def pytest_unconfigure(config):
    if root := getattr(config, "jax_cache_root", None):
        shutil.rmtree(root, ignore_errors=True)


def _link_entries(source: Path, target: Path):
    """Hard-link into target each cache entry of source that target lacks."""
    if not source.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    have = {p.name for p in target.iterdir()}
    for entry in source.iterdir():
        if entry.name.endswith("-cache") and entry.name not in have:
            with contextlib.suppress(FileExistsError):  # another worker's link came first
                (target / entry.name).hardlink_to(entry)


def _worker_caches() -> tuple[Path, Path] | None:
    """This worker's cache and the shared one, where the kit chose them."""
    root, own = os.environ.get(CACHE_ROOT), os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not root or not own or Path(own).parent != Path(root):
        return None
    return Path(own), Path(root, "shared")


def pytest_runtest_setup(item):
    if caches := _worker_caches():
        _link_entries(caches[1], caches[0])


def pytest_runtest_teardown(item, nextitem):
    if caches := _worker_caches():
        _link_entries(caches[0], caches[1])


def pytest_collection_modifyitems(config, items):
    """Leave out the batteries the tier does not select, and in the quick tier
    the release path's checks (tests/tiers.py); then
    run the slowest first (tests marked slow, then the FFI bakes' own tests and
    mutants, which build C++), dealt round the workers (_slowest_first): the
    workers then even out on the short tests at the end instead of one
    finishing a long test alone. (Other bakes keep their place, beside the
    other tests of the same bake.)"""
    chosen = selection(config)

    def selected(item):
        marker = item.get_closest_marker("battery")
        batteries = None if marker is None else tuple(marker.args)
        return chosen.runs(batteries, item.get_closest_marker("release_path") is not None)

    left_out = [item for item in items if not selected(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if selected(item)]
    _slowest_first(items)


def _slowest_first(items):
    """The heavy tests first, dealt round the workers. pytest-xdist's worksteal
    gives each worker one contiguous share of the queue, in order, and an idle
    worker steals the end of a busy one's; with every heavy test at the front
    of the first share, one worker ran them one after another and the full
    tier ended on the FFI bakes alone. So each share starts with its own
    heavy tests (the first, the n+1st, ... to the first worker), then its run
    of the others, in their order."""

    def rank(item):
        ffi_bake = item.originalname == "test_own_tests_pass_then_every_mutant_is_killed" and (
            "[ffi-" in item.name
        )
        return (item.get_closest_marker("slow") is None, not ffi_bake)

    heavy = sorted((item for item in items if rank(item) != (True, True)), key=rank)
    rest = [item for item in items if rank(item) == (True, True)]
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    ordered, left, start = [], len(items), 0
    for k in range(workers):
        share = heavy[k::workers]
        size = left // (workers - k)  # worksteal's first split (xdist 3.x)
        take = max(size - len(share), 0)
        ordered += share + rest[start : start + take]
        start += take
        left -= len(share) + take
    items[:] = ordered + rest[start:]


def option_combinations(rung):
    """Every combination of a template's code options (names and repository
    options left at their defaults; repository_variants covers the latter)."""
    options = load_options(template_dir(rung))
    choices = {
        key: o.choices for key, o in options.items() if o.choices and key not in REPOSITORY_OPTIONS
    }
    for values in itertools.product(*choices.values()):
        yield dict(zip(choices, values, strict=True))


def covering_combinations(rung):
    """The combinations whose own tests the kit runs: the default first, then
    greedily whichever covers the most pairs of two options' values not yet
    seen together, until every pair has been (pairwise testing). A template
    with two options is all its combinations; export's four options need
    seven of twenty-four. Every combination is still baked, linted,
    type-checked and held to the repository standard; an interaction of three
    options that two never show would go unseen, which the templates' options
    (each changes a separate part of the project) make unlikely.

    Then the skeletons (example=none: issue 25): the default skeleton (the
    other options at their defaults), then one per other value of each other
    option, the rest at the default skeleton's. So every pair of the skeleton
    and an option's value runs (pallas's skeleton with backward=reference
    failed its own suite, unseen while only the default skeleton ran), and a
    skeleton that fails differs from the default one in a single option."""
    every = list(option_combinations(rung))
    combinations = [c for c in every if c.get("example") != "none"]

    def pairs(combo):
        items = sorted(combo.items())
        return set(itertools.combinations(items, 2)) or {tuple(items)}

    chosen = [combinations[0]]
    missing = set().union(*map(pairs, combinations)) - pairs(combinations[0])
    while missing:
        best = max(combinations, key=lambda c: len(pairs(c) & missing))
        chosen.append(best)
        missing -= pairs(best)
    return chosen + skeleton_combinations(rung)


def skeleton_combinations(rung):
    """The default skeleton, then it with each other value of each other
    option (one option changed at a time); none if the template has no skeleton."""
    default = next((c for c in option_combinations(rung) if c.get("example") == "none"), None)
    if default is None:
        return []
    options = load_options(template_dir(rung))
    return [default] + [
        {**default, key: value}
        for key in default
        if key != "example"
        for value in options[key].choices
        if value != default[key]
    ]


def default_skeleton(rung):
    """The skeleton with the other options at their defaults, the one whose
    conformance matrix runs in every tier (see test_templates.py)."""
    return skeleton_combinations(rung)[0]


def repository_variants(rung):
    """One combination per non-default value of each repository option
    (licence, CI), everything else at its default."""
    options = load_options(template_dir(rung))
    for key in sorted(REPOSITORY_OPTIONS & options.keys()):
        for value in options[key].choices[1:]:
            yield {key: value}


def combination_id(rung, combo):
    return "-".join([rung.name, *(f"{k}={v}" for k, v in combo.items())])


ALL_COMBINATIONS = [
    pytest.param((rung, combo), id=combination_id(rung, combo))
    for rung in available()
    for combo in option_combinations(rung)
]
# The worked example's combinations and the default skeleton: the skeleton
# differs from the example only in the op's files, so checks of the rest of
# the project (repository standard, types) need it once, not per option.
EXAMPLE_AND_SKELETON = [
    param
    for param in ALL_COMBINATIONS
    if param.values[0][1].get("example") != "none"
    or param.values[0][1] == default_skeleton(param.values[0][0])
]


def oldest_jax_combination(rung):
    """The one combination per template whose own tests (and mutants) run
    under the window's oldest JAX instead of the newest (issue 28): the first
    covering combination after the default that runs its whole suite (not an
    [only_tests] selection such as ffi's CUDA build checks) and holds no value
    its mutations.toml lists under `oldest_jax_avoids`. One per template,
    so the oldest JAX costs the suite no extra run."""
    import mutation

    mutations = mutation.load(template_dir(rung))

    def runs_there(combo):
        avoided = any(
            f"{key}={value}" in mutations.oldest_jax_avoids for key, value in combo.items()
        )
        return not mutations.tests_for(combo) and not avoided

    return next(c for c in covering_combinations(rung)[1:] if runs_there(c))


def oldest_jax_path() -> Path:
    """A folder holding jax and jaxlib at the window's oldest version, to put
    first on PYTHONPATH; the rest (numpy, scipy, ml_dtypes...) comes from this
    environment. Made once, under a lock, and kept between runs (git-ignored):
    every worker and every baked project shares it."""
    import fcntl

    from jax_ladder.versions import JAX_OLDEST

    folder = REPO / ".cache" / f"jax-{JAX_OLDEST}-py{sys.version_info[0]}{sys.version_info[1]}"
    folder.parent.mkdir(exist_ok=True)
    with (folder.parent / "oldest-jax.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "jax" / "__init__.py").exists():
            partial = Path(tempfile.mkdtemp(dir=folder.parent))
            pins = [f"jax=={JAX_OLDEST}", f"jaxlib=={JAX_OLDEST}"]
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
            command += ["--disable-pip-version-check", "--target", str(partial), *pins]
            subprocess.run(command, check=True)
            shutil.rmtree(folder, ignore_errors=True)
            partial.rename(folder)
    return folder


def tested_id(rung, combo):
    """The combination's id; the one tested under the oldest JAX says so."""
    from jax_ladder.versions import JAX_OLDEST

    oldest = combo == oldest_jax_combination(rung)
    return combination_id(rung, combo) + (f"-jax={JAX_OLDEST}" if oldest else "")


def is_default(rung, combo):
    """Whether combo is the template's default combination (the quick tier's)."""
    return combo == covering_combinations(rung)[0]


def quick_or_battery(rung, combo):
    """No marks for the default combination; the others are in the battery."""
    return () if is_default(rung, combo) else battery(rung)


# The default combination runs its own suite in both tiers (its mutants only
# in the template's battery); the other covering combinations are battery.
TESTED_COMBINATIONS = [
    pytest.param((rung, combo), id=tested_id(rung, combo), marks=quick_or_battery(rung, combo))
    for rung in available()
    for combo in covering_combinations(rung)
]


def run_cli(*args, cwd, stdin=subprocess.DEVNULL):
    """Run the installed `jax-ladder` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "jax_ladder", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_usage_error(args, message, cwd, capsys, monkeypatch):
    """`jax-ladder ARGS`, in this process, fails as bad input must: exit status 2,
    one line `jax-ladder: error: ...` containing message, no traceback, and
    nothing written in cwd. (In-process: a subprocess would only add the
    interpreter's start-up; tests/test_cli.py keeps one subprocess case.)"""
    from jax_ladder import cli

    monkeypatch.chdir(cwd)
    before = files_under(cwd)
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    assert message in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("jax-ladder: error: "), err
    assert "Traceback" not in err + out
    assert files_under(cwd) == before


def assert_lint_clean(directory: Path, *paths: str):
    """`ruff check` and `ruff format --check` pass on paths (default: all) in directory."""
    paths = paths or (".",)
    for args in (["check", *paths], ["format", "--check", *paths]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=directory, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def fresh_venv(env_dir: Path, cwd: Path):
    """A brand-new virtual environment at env_dir; returns run(*args, cwd=cwd),
    which runs its python with args in cwd, asserts success and returns the result."""
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    assert python != sys.executable

    def run(*args, cwd=cwd):
        result = subprocess.run(
            [python, *args], cwd=cwd, capture_output=True, text=True, timeout=1200
        )
        assert result.returncode == 0, f"{args}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        return result

    return run


def files_under(path: Path):
    return sorted(p.relative_to(path) for p in path.rglob("*"))


# The mutation score per option combination, gathered from the test reports
# (xdist workers send user_properties to the controller) and printed at the end.
MUTATION_SCORES = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        MUTATION_SCORES.extend(value for key, value in report.user_properties if key == "mutation")


def pytest_terminal_summary(terminalreporter):
    if not MUTATION_SCORES:
        return
    terminalreporter.section("mutation score (killed / applicable mutants)")
    for combo, killed, total, seconds in sorted(MUTATION_SCORES):
        terminalreporter.write_line(f"{combo:<60} {killed:>3} / {total:<3} {seconds:6.1f} s")
    killed = sum(s[1] for s in MUTATION_SCORES)
    total = sum(s[2] for s in MUTATION_SCORES)
    terminalreporter.write_line(f"{'all':<60} {killed:>3} / {total:<3}")
