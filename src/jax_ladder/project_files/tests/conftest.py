import os
import tomllib
import zlib
from fnmatch import fnmatchcase
from pathlib import Path

import jax
import numpy as np
import pytest
from packaging.requirements import Requirement  # packaging: a dependency of pytest

from compare import PLATFORM_WORST, WORST
from devices import MISSING_FACILITY, SIMULATED_MESHES

# Eight simulated CPU devices for the sharding tests. This must run before JAX
# starts its backend, which is why it is here: pytest imports conftest.py
# before any test module. (XLA_FLAGS=--xla_force_host_platform_device_count=8
# does the same.)
jax.config.update("jax_num_cpu_devices", 8)


# float64 is needed for the float64 cases and for check_grads' finite
# differences. Tests always pass explicit dtypes, so float32 stays float32.
jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's name: random, yet reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# Under pytest-xdist (-n) each worker compares, and only the controller prints
# the summary: each worker hands its worst errors and meshes to it.
def pytest_sessionfinish(session):
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["jax_ladder"] = {
            "worst": dict(WORST),
            "platforms": dict(PLATFORM_WORST),
            "meshes": dict(SIMULATED_MESHES),
        }


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error without xdist
def pytest_testnodedown(node, error):
    seen = getattr(node, "workeroutput", {}).get("jax_ladder")
    if not seen:
        return
    worst = seen["worst"]
    if worst["test"] and (worst["fraction"] > WORST["fraction"] or not WORST["test"]):
        WORST.update(worst)
    for key, (times, test) in seen["platforms"].items():
        if times > PLATFORM_WORST.get(key, (-1.0, ""))[0]:
            PLATFORM_WORST[key] = (times, test)
    SIMULATED_MESHES.update(seen["meshes"])


def pytest_terminal_summary(terminalreporter):
    for platform, count in SIMULATED_MESHES.items():
        terminalreporter.write_line(
            f"sharding: meshes of simulated CPU devices, as {platform} has {count} device(s); "
            f"with enough {platform} devices they run there"
        )
    if WORST["test"]:
        terminalreporter.write_line(
            f"oracle: worst error {WORST['error']:.2e} "
            f"({100 * WORST['fraction']:.1f}% of tolerance) in {WORST['test']}: "
            f"{WORST['ulps']:.3g} ulps of {WORST['dtype']}"
        )
    for key, (times, test) in sorted(PLATFORM_WORST.items()):
        terminalreporter.write_line(
            f"oracle on {key}: worst error {times:.3g}x the IEEE tolerance in {test} "
            "(tests/compare.py PLATFORM_BITS allows this platform more)"
        )
    todos = declaration_todos()
    if todos:
        terminalreporter.write_line(
            f"declaration: {len(todos)} {MARKER} left in tests/op_spec.py (line "
            f"{', '.join(map(str, todos))}): until you rewrite them, the starter's notes and "
            "tolerances stand for your op, and its notes reach the README's support table"
        )


# The skeleton's marker in the files that are yours, spelled in two parts so
# that this file, which is not yours, carries none.
MARKER = "TO" + "DO"


def declaration_todos():
    """The lines of tests/op_spec.py that still carry the skeleton's MARKER."""
    spec = Path(__file__).with_name("op_spec.py")
    if not spec.is_file():
        return []
    return [n for n, line in enumerate(spec.read_text().splitlines(), 1) if MARKER in line]


def pytest_report_header():
    """Say, once at the start of a run, when the installed JAX is outside the
    range this project pins (and was tested on): JAX's extension APIs change
    between releases."""
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    if not pyproject.is_file():  # tests run against an installed wheel
        return None
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    (pin,) = [r for r in map(Requirement, dependencies) if r.name == "jax"]
    if pin.specifier.contains(jax.__version__, prereleases=True):
        return None
    return (
        f"WARNING: JAX {jax.__version__} is outside the range this project was tested on "
        f"({pin.specifier}). `jax-ladder update` takes the starter's fixes for newer JAX; "
        "widen the pin in pyproject.toml only once the tests pass."
    )


# The edit loop's selection, `pytest -m quick`: seconds where the whole suite
# takes minutes. The reference against its float64 oracle (test_reference.py),
# the project's own tests marked quick, then one conformance cell of each
# family an adaptation breaks: the op against the reference eagerly (in each
# declared dtype: a bfloat16 input given a float32 result shows there), jitted,
# with donated arguments, under vmap (each argument batched alone, and all on
# axes of their own), differentiated against random cotangents, at size 1 along
# each axis and at one ragged size, on three hard inputs (exp overflowing near
# 88 and far past it, a division by a norm of zero), one shard_map cell per
# split axis (a per-shard result that needed the whole axis), each axis split
# under jit with its collectives counted (a parameter left replicated, one
# all-gather more), and the exported round trip where the op is exported.
# The whole suite stays the project's CI.
QUICK_MARKER = "quick: the reference against its oracle and one cell of each family (-m quick)"
QUICK_CELLS = (
    "eager",
    "eager@*",
    "jit",
    "jit-donate",
    "vmap-new-axis",
    "vmap-only-*",
    "vmap-apart",
    "grad-*",
    "size-*-1",
    "hard-exp-edge",
    "hard-shifted",
    "hard-zeros",
    "shard-map-*-1d",
    "jit-auto-*",
    "export-symbolic",
)
# second order; shard_map's gradients; two axes split at once (one each is
# enough); an argument alone on an inner axis (vmap-apart puts one there)
NOT_QUICK = ("grad-grad-*", "shard-map-grad-*", "jit-auto-*+*", "vmap-only-*-inner")
# One ragged size (the first axis's): a size cell recompiles the op and its
# gradient, the quick selection's dearest cells.
QUICK_ONCE = ("size-*-ragged",)


# Every cell of the matrix (test_conformance.py::test_cell), whatever else it
# is marked: `-m "not matrix"` runs the project's other tests alone.
MATRIX_MARKER = "matrix: a conformance matrix cell (tests/test_conformance.py::test_cell)"


def pytest_collection_modifyitems(items):
    once = set(QUICK_ONCE)
    for item in items:
        params = getattr(item, "callspec", None)
        cell = params.params.get("cell") if params else None
        core = item.path.name == "test_conformance.py" and cell is not None
        if core:
            item.add_marker(pytest.mark.matrix)
        first = core and next((p for p in once if fnmatchcase(cell, p)), None)
        if first:
            once.discard(first)
        listed = core and (
            any(fnmatchcase(cell, pattern) for pattern in QUICK_CELLS)
            and not any(fnmatchcase(cell, pattern) for pattern in NOT_QUICK)
        )
        if item.path.name == "test_reference.py" or first or listed:
            item.add_marker(pytest.mark.quick)


# A project may refuse the installed JAX for one of its options (the Pallas
# mosaic_gpu backend on JAX 0.10, say): importing it raises an ImportError that
# says "needs JAX <version>". A test module that imports it is then skipped
# with that message, instead of failing the run once per module; the test that
# checks the refusal itself still runs.
REFUSAL = "needs JAX "


def skip_if_refused(collector, report):
    text = str(report.longrepr) if report.failed else ""
    if REFUSAL in text:
        reason = next(line for line in text.splitlines() if REFUSAL in line)
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), None, reason.removeprefix("E").strip())
    return report


# REQUIRE_ACCELERATOR=gpu or tpu (the accelerator workflow sets it) marks a run
# on that hardware. It fails unless JAX's default backend is that platform (JAX
# names NVIDIA and AMD GPUs "gpu"), and a test that skips there fails with its
# skip reason: there, a skip would hide a test that never ran on the hardware.
REQUIRED_PLATFORM = os.environ.get("REQUIRE_ACCELERATOR", "")


def pytest_addoption(parser):
    parser.addini(
        "jax_default_device",
        "the platform (cpu, gpu or tpu) whose device the tests use unless they choose "
        "one; unset: JAX's default backend",
        default="",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", QUICK_MARKER)
    config.addinivalue_line("markers", MATRIX_MARKER)
    if platform := config.getini("jax_default_device"):
        jax.config.update("jax_default_device", platform)
    if not REQUIRED_PLATFORM:
        return
    if REQUIRED_PLATFORM not in ("gpu", "tpu"):
        raise pytest.UsageError(f"REQUIRE_ACCELERATOR={REQUIRED_PLATFORM!r}: use gpu or tpu")
    if jax.default_backend() != REQUIRED_PLATFORM:
        raise pytest.UsageError(
            f"REQUIRE_ACCELERATOR={REQUIRED_PLATFORM}, but JAX's default backend is "
            f"{jax.default_backend()} (devices: {jax.devices()})"
        )


def fail_if_skipped(report):
    """Under REQUIRE_ACCELERATOR, turn a skip (not an expected failure, nor a
    missing facility's) into a failure that names the skip's reason."""
    if REQUIRED_PLATFORM and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        if reason.startswith(MISSING_FACILITY):  # the machine's lack, not the accelerator's
            return report
        report.outcome = "failed"
        report.longrepr = f"skipped on {REQUIRED_PLATFORM}, where every test must run: {reason}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    return fail_if_skipped((yield))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    return fail_if_skipped(skip_if_refused(collector, (yield)))
