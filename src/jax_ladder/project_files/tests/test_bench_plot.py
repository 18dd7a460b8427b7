"""The benchmark's plot: `benchmarks/bench.py --quick --plot` draws one (run as
a user runs it), and the measured plot the docs show reads back the same way:
each panel titled with both axes labelled, at least two named series (the
extension and its reference), none empty."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import plot  # noqa: E402  (benchmarks/plot.py; matplotlib comes with the test extra)
from devices import cpu_subprocess_env  # noqa: E402

# How a project refuses an option the installed JAX cannot run (api=hijax on
# JAX 0.10, say): its error says "needs JAX <version>". Then there is no
# benchmark to draw here, which is a skip, not a failure.
REFUSAL = "needs JAX "


def check(panels):
    assert panels, "no panel drawn"
    for i, panel in enumerate(panels):
        where = f"panel {i} ({panel.title!r})"
        assert panel.title and panel.xlabel and panel.ylabel, f"{where}: a label is missing"
        assert len(panel.series) >= 2, f"{where}: series {sorted(panel.series)}"
        empty = [name for name, points in panel.series.items() if not points]
        assert not empty, f"{where}: no points drawn for {empty}"


def test_the_quick_benchmark_draws_its_plot(tmp_path):
    # The drawing is checked here, not the speed: on the CPU, since this run
    # may hold the accelerator (a TPU admits one program at a time).
    svg = tmp_path / "benchmark.svg"
    command = [sys.executable, "benchmarks/bench.py", "--quick", "--plot", str(svg)]
    run = subprocess.run(
        command, cwd=ROOT, env=cpu_subprocess_env(), capture_output=True, text=True, timeout=600
    )
    if run.returncode != 0 and REFUSAL in run.stderr:
        pytest.skip(next(line for line in run.stderr.splitlines() if REFUSAL in line))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    check(plot.read_plot(svg))


# The measured plots the docs show: docs/benchmark.svg, and one per device it
# was measured on (docs/benchmark-tpu.svg, say).
MEASURED = sorted((ROOT / "docs").glob("benchmark*.svg"))


@pytest.mark.skipif(not MEASURED, reason="no measured plot in docs/")
@pytest.mark.parametrize("svg", MEASURED, ids=lambda path: path.name)
def test_the_measured_plot_in_the_docs_reads_back(svg):
    panels = plot.read_plot(svg)
    check(panels)
    # A measurement, not a smoke run: a curve over several sizes.
    few = sorted(
        f"{name} ({len(points)})"
        for panel in panels
        for name, points in panel.series.items()
        if len(points) < 3
    )
    assert not few, (
        f"docs/{svg.name}: fewer than 3 sizes in {', '.join(few)}; declare more "
        "benchmark sizes (see benchmarks/bench.py) and redraw it, or delete it"
    )
