"""`jax-ladder opcheck` (issue 60): an op that passes and an op with a planted
bug, declared in a file of a temporary folder, run as a user runs them (a
subprocess of `python -m jax_ladder`, which gives itself 8 CPU devices); the
exit status, the text (failures grouped by likely cause, the command that
reruns each), --json and --junit, FILE::NAME, MODULE:ATTR --signature,
--cells, --list, and the one-line errors. Then the report's grouping and its
data formats, on results made by hand. A few cells each (eager, jit,
vmap-*): seconds, not the whole matrix."""

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import assert_usage_error

import jax_ladder

CELLS = "eager,jit,vmap-*"

SPECS = """import numpy as np

from jax_ladder.opcheck import Arg, OpSpec, Ulps


def scale(x, w):
    return x * w


def scale_off(x, w):
    return x * w + 1e-3  # the planted bug


def declare(name, op):
    return OpSpec(
        name=name,
        op=op,
        reference=lambda x, w: x * w,
        oracle=lambda x, w: np.asarray(x) * np.asarray(w),
        args=(Arg("x", ("b", "n")), Arg("w", ("n",))),
        outputs=(("b", "n"),),
        sizes={"b": 8, "n": 12},
        tolerance=Ulps(1, 2),
        gradient_tolerance=Ulps(2, 4),
        batch_axes=("b",),
        shard_map_axes=("b",),
    )


GOOD = declare("scale", scale)
BAD = declare("scale, off", scale_off)
"""
MODULE = """import jax


def scale(x, w):
    return x * w


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def head2(x):  # an output axis no argument has
    return x[:, :2] * 2.0
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "decl").mkdir()
    (tmp_path / "decl" / "specs.py").write_text(SPECS)
    (tmp_path / "decl" / "broken.py").write_text("import not_a_module_anywhere\n")
    (tmp_path / "mymod.py").write_text(MODULE)
    return tmp_path


def opcheck(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m jax_ladder opcheck ARGS` in folder, with this kit."""
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(jax_ladder.__file__).parents[1]),
        "JAX_PLATFORMS": "cpu",
    }
    return subprocess.run(
        [sys.executable, "-m", "jax_ladder", "opcheck", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_passing_op_exits_0_and_writes_json_and_junit(folder):
    run = opcheck(
        folder, "decl/specs.py::GOOD", "--cells", CELLS, "--seed", "3", "--json", "r.json",
        "--junit", "r.xml",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "scale: 19 cells: 19 passed" in run.stdout
    assert "failed" not in run.stdout.replace("none failed", "")
    data = json.loads((folder / "r.json").read_text())
    assert data["ok"]
    assert data["seed"] == 3
    (op,) = data["ops"]
    assert op["op"] == "scale"
    assert op["declaration"] == "decl/specs.py::GOOD"
    assert op["totals"]["passed"] == len(op["cells"]) == 19
    for cell in op["cells"]:
        assert cell["outcome"] == "passed"
        assert cell["seed"] == 3
        assert isinstance(cell["seconds"], float)
        assert cell["seconds"] > 0
    assert [c["cell"] for c in op["cells"]][:3] == ["eager", "jit", "vmap-new-axis"]
    suite = ET.parse(folder / "r.xml").getroot().find("testsuite")
    assert suite.get("tests") == "19"
    assert suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == 19


def test_a_planted_bug_exits_1_grouped_with_the_command_that_reruns_it(folder):
    run = opcheck(folder, "decl/specs.py", "--cells", CELLS, "--json", "-", "--junit", "r.xml")
    assert run.returncode == 1, run.stdout + run.stderr
    text = run.stderr  # --json -: the JSON on stdout, the text on stderr
    assert "scale: 19 cells: 19 passed" in text
    assert "scale, off: 19 cells: " in text
    # eager and jit share the values family, the vmap-* cells theirs.
    assert "    values: eager: [eager] eager, output 0: " in text
    assert "      and 1 cell like it: jit" in text
    assert "    vmap: vmap-new-axis: " in text
    assert "cells like it: vmap-only-x, vmap-only-w" in text
    rerun = "jax-ladder opcheck decl/specs.py::BAD --cells eager --seed 0"
    assert f"      rerun: {rerun}" in text
    assert "op(s), 38 cells: " in text.splitlines()[-1]
    data = json.loads(run.stdout)
    assert not data["ok"]
    assert data["totals"]["ops"] == 2
    good, bad = data["ops"]
    assert good["ok"]
    assert not bad["ok"]
    eager = bad["cells"][0]
    assert eager["cell"] == "eager"
    assert eager["outcome"] == "failed"
    assert eager["family"] == "values"
    assert eager["rerun"] == rerun
    assert "ulps of float32" in eager["message"]
    suites = ET.parse(folder / "r.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["opcheck[scale]", "opcheck[scale, off]"]
    failures = suites[1].findall("testcase/failure")
    assert len(failures) == int(suites[1].get("failures")) > 0
    assert all("\n" not in f.get("message") for f in failures)
    # The rerun command runs that one cell, and fails as it did.
    again = opcheck(folder, *shlex.split(rerun)[2:])
    assert again.returncode == 1, again.stdout + again.stderr
    assert "scale, off: 1 cells: 1 failed" in again.stdout


def test_a_function_with_a_signature_is_checked_against_itself(folder):
    run = opcheck(
        folder, "mymod:scale", "--signature", "x[b,n], w[n] -> [b,n]", "--sizes", "b=4",
        "--cells", "eager,jit,grad-x,grad-w", "--json", "r.json",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mymod:scale: 4 cells: 4 passed" in run.stdout
    assert "oracle: the op itself in float64 — a self-consistency check" in run.stdout
    assert "sizes b=4, n=12 (--sizes to change them)" in run.stdout
    (op,) = json.loads((folder / "r.json").read_text())["ops"]
    assert op["oracle"].startswith("the op itself in float64")
    assert [c["cell"] for c in op["cells"]] == ["eager", "jit", "grad-x", "grad-w"]


def test_a_signature_with_leading_axes_and_their_sizes(folder):
    run = opcheck(
        folder, "mymod:softmax", "--signature", "x[...,n] -> [...,n]", "--sizes", "...=2*3",
        "--cells", "eager,jit,vmap-new-axis,grad-x", "--json", "r.json",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mymod:softmax: 4 cells: 4 passed" in run.stdout
    assert "sizes n=8, ...=2*3 (--sizes to change them)" in run.stdout
    (op,) = json.loads((folder / "r.json").read_text())["ops"]
    assert op["declaration"] == (
        "mymod:softmax --signature 'x[...,n] -> [...,n]' --sizes 'n=8,...=2*3'"
    )


def test_list_prints_the_selected_cells_names(folder):
    run = opcheck(folder, "decl/specs.py::GOOD", "--list", "--cells", "vmap-of-*,grad-*")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [
        "vmap-of-grad",
        "vmap-of-grad-inner",
        "vmap-of-grad-only-x",
        "vmap-of-grad-only-w",
        "vmap-of-grad-apart",
        "grad-x",
        "grad-w",
        "grad-grad-explicit-b",
        "grad-grad-explicit-n",
        "grad-grad-explicit-vmap-new-axis",
        "grad-grad-explicit-vmap-b",
        "grad-grad-explicit-vmap-n",
    ]


def test_a_declaration_that_fails_to_import_is_one_line_and_exit_2(folder):
    run = opcheck(folder, "decl/broken.py")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines() == [
        "jax-ladder: error: broken.py: the declaration failed to import: ModuleNotFoundError: "
        "No module named 'not_a_module_anywhere' (broken.py, line 1)"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{decl}/nowhere.py"], "nowhere.py: no such declaration file"),
        (["{decl}/specs.py::NOPE"], "specs.py has no OpSpec named ['NOPE']"),
        (["{decl}/specs.py", "--cells", "eager,nope"], "no cell is named ['nope']"),
        (["{decl}/specs.py", "--cells", ","], "--cells names no cell"),
        (["mymod:scale"], "a MODULE:ATTR needs --signature"),
        (["{decl}/specs.py", "--signature", "x[n] -> [n]"], "--signature is for a MODULE:ATTR"),
        (["{decl}/specs.py", "--sizes", "n=4"], "--sizes is for --signature"),
        (["mymod:scale", "--signature", "x[b] w[b] -> [b]"], "expected ','"),
        (["mymod:scale", "--signature", "x[b]"], "expected ',' or '->' at column 5"),
        (["mymod:scale", "--signature", "x[b] -> [b]", "--sizes", "n=4"], "has no axis 'n'"),
        (["mymod:nothing", "--signature", "x[b] -> [b]"], "'mymod' has no attribute 'nothing'"),
    ],
)
def test_usage_and_declaration_errors_are_one_line(folder, args, message, capsys, monkeypatch):
    # The declarations lie outside the folder the command runs in (whose
    # files assert_usage_error compares): importing one writes __pycache__.
    cwd = folder / "cwd"
    cwd.mkdir()
    (cwd / "mymod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(cwd))
    args = [a.format(decl=folder / "decl") for a in args]
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    # This process keeps the CPU devices it has (the command would ask for 8).
    monkeypatch.setattr("jax_ladder.opcheck.plugin.simulate_cpu_devices", lambda: None)
    assert_usage_error(["opcheck", *args], message, cwd, capsys, monkeypatch)


# --- The report: families, grouping, data -----------------------------------------
def results(*rows):
    from jax_ladder.opcheck.report import CellResult

    return tuple(CellResult(cell, outcome, message, 0.25, 7) for cell, outcome, message in rows)


def test_cells_belong_to_their_family_and_a_dtype_variant_to_its_base_cells():
    from jax_ladder.opcheck.report import cell_family

    families = {
        "eager": "values",
        "jit-donate": "values",
        "vmap-of-grad": "vmap",
        "size-n-ragged": "sizes",
        "grad-x": "autodiff",
        "vmap-jvp": "autodiff",
        "check-grads-2": "autodiff",
        "scan": "control flow",
        "hard-huge": "hard inputs",
        "jit-auto-b": "sharding",
        "shard-map-b-1d": "sharding",
        "grad-grad-explicit-n": "sharding",
        "lower-cpu": "export",
        "export-symbolic": "export",
        "eager@bfloat16": "values",
        "shard-map-partial-b@float16": "sharding",
        "something-new": "other",
    }
    assert {cell: cell_family(cell) for cell in families} == families


def test_failures_are_grouped_by_family_and_by_the_same_message():
    from jax_ladder.opcheck.report import Report

    report = Report(
        "op",
        results(
            ("eager", "failed", "[eager] eager, output 0: off by 3e+07 ulps\nsecond line"),
            ("jit", "failed", "[jit] jit, output 0: off by 2e+07 ulps"),
            ("vmap-new-axis", "passed", ""),
            ("jvp", "refused", "no forward rule"),
            ("grad-x", "failed", "[grad-x] TypeError: no rule for x"),
            ("shard-map-b-1d", "failed", "[shard-map-b-1d] TypeError: no rule for x"),
            ("hard-zeros", "failed", "[hard-zeros] eager, output 0: nan"),
            ("eager@bfloat16", "failed", "[eager@bfloat16] eager, output 0: off by 9 ulps"),
        ),
    )
    groups = report.failure_groups()
    assert [(g.families, g.first.cell, [r.cell for r in g.others]) for g in groups] == [
        (("values",), "eager", ["jit", "eager@bfloat16"]),
        (("autodiff", "sharding"), "grad-x", ["shard-map-b-1d"]),
        (("hard inputs",), "hard-zeros", []),
    ]
    assert str(report).splitlines() == [
        "op: 8 cells: 1 passed, 1 refused, 6 failed",
        "  eager           failed: [eager] eager, output 0: off by 3e+07 ulps",
        "  jit             failed: like eager",
        "  vmap-new-axis   passed",
        "  jvp             refused: no forward rule",
        "  grad-x          failed: [grad-x] TypeError: no rule for x",
        "  shard-map-b-1d  failed: like grad-x",
        "  hard-zeros      failed: [hard-zeros] eager, output 0: nan",
        "  eager@bfloat16  failed: like eager",
        "failed, by likely cause (3):",
        "  values: eager: [eager] eager, output 0: off by 3e+07 ulps",
        "    and 2 cells like it: jit, eager@bfloat16",
        "  autodiff, sharding: grad-x: [grad-x] TypeError: no rule for x",
        "    and 1 cell like it: shard-map-b-1d",
        "  hard inputs: hard-zeros: [hard-zeros] eager, output 0: nan",
    ]


def test_a_group_names_at_most_eight_others():
    from jax_ladder.opcheck.report import Report

    cells = [f"vmap-{i}" for i in range(12)]
    report = Report("op", results(*[(c, "failed", f"[{c}] boom") for c in cells]))
    (line,) = [x for x in str(report).splitlines() if "like it" in x]
    assert line == "    and 11 cells like it: " + ", ".join(cells[1:9]) + "…"


def test_the_report_as_json_and_junit():
    from jax_ladder.opcheck.report import Report, junit_xml

    report = Report(
        "op",
        results(
            ("eager", "passed", ""),
            ("jvp", "refused", "no forward rule"),
            ("grad-x", "failed", "[grad-x] off by 3 ulps\nat index (1,)"),
            ("jit-auto-b", "skipped", "needs 4 devices"),
        ),
    )
    data = json.loads(report.to_json())
    assert data["op"] == "op"
    assert not data["ok"]
    assert data["totals"] == {
        "cells": 4, "passed": 1, "refused": 1, "failed": 1, "skipped": 1, "seconds": 1.0,
    }  # fmt: skip
    assert data["cells"][2] == {
        "cell": "grad-x",
        "family": "autodiff",
        "outcome": "failed",
        "message": "[grad-x] off by 3 ulps\nat index (1,)",
        "seconds": 0.25,
        "seed": 7,
    }
    root = ET.fromstring(report.to_junit())
    (suite,) = root.findall("testsuite")
    assert suite.attrib == {
        "name": "opcheck[op]", "tests": "4", "failures": "1", "errors": "0", "skipped": "1",
        "time": "1.000",
    }  # fmt: skip
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "opcheck[op][eager]",
        "opcheck[op][jvp]",
        "opcheck[op][grad-x]",
        "opcheck[op][jit-auto-b]",
    ]
    failure = cases[2].find("failure")
    assert failure.get("message") == "[grad-x] off by 3 ulps"
    assert failure.text == "[grad-x] off by 3 ulps\nat index (1,)"
    assert cases[3].find("skipped").get("message") == "needs 4 devices"
    assert len(ET.fromstring(junit_xml([report, report])).findall("testsuite")) == 2


UNIT = """import jax.numpy as jnp
import numpy as np

from jax_ladder.opcheck import OpSpec, Ulps


def unit(x):  # right, but its squares overflow float32 where the oracle's do not
    return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True))


def unit_f64(x):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True))


SPEC = OpSpec(
    name="unit",
    op=unit,
    reference=lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True),
    oracle=unit_f64,
    signature="x[b,n] -> [b,n]",
    sizes={"b": 4, "n": 8},
    tolerance=Ulps(4, 4),
    gradient_tolerance=Ulps(8, 8),
)
"""


def test_a_cell_the_reference_fails_the_same_way_says_so(folder):
    """hard-huge's squares overflow float32 in the op and in the reference
    alike: the failure says the inputs may be beyond what the problem
    supports (a declaration's fix), where the planted bug's says nothing."""
    (folder / "decl" / "unit.py").write_text(UNIT)
    run = opcheck(folder, "decl/unit.py", "--cells", "hard-huge,eager", "--json", "r.json")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the plain-JAX reference fails it the same way, on the same inputs" in run.stdout
    (op,) = json.loads((folder / "r.json").read_text())["ops"]
    cells = {c["cell"]: c for c in op["cells"]}
    assert cells["eager"]["outcome"] == "passed"
    assert cells["hard-huge"]["reference_fails_too"].startswith("[hard-huge] eager, output 0")
    bad = opcheck(folder, "decl/specs.py::BAD", "--cells", "eager")
    assert bad.returncode == 1
    assert "plain-JAX reference" not in bad.stdout


SECOND_ORDER = """import jax.numpy as jnp

from jax_ladder.opcheck import Arg, OpSpec, Ulps


def reference(x, w):
    return jnp.sum(x * w, axis=-1)


def dropping(x, w):  # wrong once a row is longer than 3: its last element is left out
    n = x.shape[-1]
    return jnp.sum((x * w)[..., : n - 1] if n > 3 else x * w, axis=-1)


DROPPING = OpSpec(
    "rowdot", dropping, reference, None,
    (Arg("x", ("b", "n")), Arg("w", ("n",))), (("b",),), {"b": 8, "n": 16},
    Ulps(4, 4), Ulps(4, 4), batch_axes=("b",),
)
"""


def test_shrinking_a_second_order_cell_writes_its_script_and_the_json(folder):
    """grad-grad-explicit-* was taken for grad-<arg> (a ValueError, and no
    --json written): every cell's repro is written, and the report always."""
    (folder / "decl" / "second.py").write_text(SECOND_ORDER)
    run = opcheck(
        folder, "decl/second.py", "--cells", "grad-grad-explicit-b", "--shrink", "--json",
        "r.json", "--junit", "r.xml",
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "    shrunk: " in run.stdout, run.stdout
    (op,) = json.loads((folder / "r.json").read_text())["ops"]
    (cell,) = op["cells"]
    assert cell["outcome"] == "failed"
    assert cell["shrunk"][0].startswith("shrunk: "), cell
    assert (folder / "r.xml").is_file()


def test_tracebacks_prints_each_failed_cells_traceback(folder):
    run = opcheck(folder, "decl/specs.py::BAD", "--cells", "eager,jit", "--tracebacks")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "  traceback of eager:" in run.stdout, run.stdout
    assert "  traceback of jit:" in run.stdout, run.stdout
    assert "    Traceback (most recent call last):" in run.stdout, run.stdout


def test_a_group_holds_one_kind_of_failure():
    from jax_ladder.opcheck.report import Report

    report = Report(
        "op",
        results(
            ("jit-auto-b", "failed", "[jit-auto-b] forward program: more collectives than the "
             "reference (op, reference): {'all-gather': (2, 0)}"),
            ("jit-explicit-b", "failed", "[jit-explicit-b] ShardingTypeError: dot_general "
             "requires contracting dimensions to have consistent sharding"),
            ("jit-explicit-n", "failed", "[jit-explicit-n] ShardingTypeError: dot_general "
             "requires contracting dimensions to have consistent sharding"),
            ("jit-auto-n", "failed", "[jit-auto-n] forward program: more collectives than the "
             "reference (op, reference): {'all-reduce': (1, 0)}"),
        ),
    )  # fmt: skip
    groups = [(g.first.cell, [r.cell for r in g.others]) for g in report.failure_groups()]
    assert groups == [("jit-auto-b", ["jit-auto-n"]), ("jit-explicit-b", ["jit-explicit-n"])]


@pytest.mark.parametrize("sizes", [[], ["--sizes", "k=2"]])
def test_an_output_only_axis_takes_its_size_from_the_op_or_sizes(folder, sizes):
    run = opcheck(
        folder, "mymod:head2", "--signature", "x[b,n] -> [b,k]", *sizes, "--cells", "eager,jit",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "sizes b=8, n=12, k=2 (--sizes to change them)" in run.stdout, run.stdout
    assert "mymod:head2: 2 cells: 2 passed" in run.stdout, run.stdout
