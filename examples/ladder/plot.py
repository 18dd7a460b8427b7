"""Draw bench.py's table as a picture: time, memory and lines of code per rung.

    python examples/ladder/bench.py --plot ladder.svg            # measure, then draw
    python examples/ladder/plot.py results.json ladder.svg       # draw a stored measurement

Reads the results file `bench.py --json` writes (results.json here is one, with the
machine and date it was measured on). Needs only matplotlib, not JAX, so the kit's
documentation build draws the stored measurement without running the benchmark.
"""

import json
import math
import sys
from pathlib import Path

INSTALL = "--plot needs matplotlib: pip install matplotlib (the kit's docs extra has it)"


def load(path):
    return json.loads(Path(path).read_text())


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit(INSTALL)
    matplotlib.use("svg")  # no display needed
    matplotlib.rcParams["svg.hashsalt"] = "jax-ladder"  # the same SVG for the same numbers
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller, searchable
    import matplotlib.pyplot as plt

    return plt


def _bars(ax, names, series, xlabel):
    """Horizontal grouped bars: one group per rung, one bar per series."""
    height = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        ys = [row + (i - (len(series) - 1) / 2) * height for row in range(len(names))]
        ax.barh(ys, values, height=height, label=label)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()  # the ladder reads top (reference) to bottom (primitive)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:  # above the panel, clear of the bars
        ax.legend(fontsize="small", loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2)


def _log_time_axis(ax, times):
    """Log scale (the interpreted Pallas kernel is 10x the rest on a CPU), bars from the
    decade below the fastest, labels on the decades only."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(left=10 ** math.floor(math.log10(min(times))))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _lines(value):
    """'56+90' (Python + C++) -> 146."""
    return sum(int(part) for part in str(value).split("+"))


AXES = ("time, ms (median, log scale; less is better)", "memory, MiB", "lines of code (+ C++)")


def plot(results, path):
    """Write the three panels of `results` (bench.py's JSON) to `path` (SVG)."""
    plt = _pyplot()
    rows = results["rows"]
    names = [row["rung"] for row in rows]
    fig, (time_ax, mem_ax, loc_ax) = plt.subplots(1, 3, figsize=(12, 4.2), sharey=True)
    _bars(
        time_ax,
        names,
        {"forward": [r["fwd_ms"] for r in rows], "value and grad": [r["vg_ms"] for r in rows]},
        AXES[0],
    )
    _log_time_axis(time_ax, [t for r in rows for t in (r["fwd_ms"], r["vg_ms"])])
    _bars(
        mem_ax,
        names,
        {
            "saved for backward": [r["saved_mib"] for r in rows],
            "temp": [r["temp_mib"] for r in rows],
        },
        AXES[1],
    )
    _bars(loc_ax, names, {"lines": [_lines(r["lines"]) for r in rows]}, AXES[2])
    rows_, d = results["shape"]
    load = f", load average {results['load_average']}" if "load_average" in results else ""
    fig.suptitle(
        f"RMS norm at every rung, float32 x ({rows_}, {d}): {results['machine']}{load}, "
        f"jax {results['jax']}, {results['date']}",
        fontsize="medium",
    )
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python plot.py RESULTS.json FILE.svg")
    plot(load(sys.argv[1]), sys.argv[2])
    print(f"wrote {sys.argv[2]}")
