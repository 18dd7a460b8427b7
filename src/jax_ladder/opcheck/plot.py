"""Draw a benchmark's measurements as an SVG, and read one back.

bench.py measures; this module draws, so it needs matplotlib (the `bench`
extra: `pip install -e .[bench]`); only `machine`, `copy_bandwidth` and
`peak`, which describe the host the numbers came from, import JAX. PEAKS is
every benchmark's table of the chips' peaks, for the share of peak it prints.
`read_plot` is what the tests use to check a drawing: axes labelled, one named
series per implementation, none empty. Each series is an SVG group whose id
is `panel<i>:series:<name>` (a dashed guide: `panel<i>:guide:<name>`), so the
check reads names, not colours or positions.
"""

import datetime
import math
import os
import platform
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

INSTALL = "--plot needs matplotlib: pip install -e '.[bench]'"
SVG = "{http://www.w3.org/2000/svg}"


# Dense bfloat16 peak (FLOP/s) and HBM bandwidth (bytes/s) per chip, by a
# substring of jax.Device.device_kind (a v5e says "TPU v5 lite"): what a
# benchmark's achieved FLOP/s and bytes/s are a share of. The vendors' figures;
# a float32 program's ceiling is lower (on a TPU, several bfloat16 passes).
PEAKS = {
    "TPU v4": (275e12, 1.2e12),
    "TPU v5 lite": (197e12, 0.82e12),
    "TPU v5e": (197e12, 0.82e12),
    "TPU v5p": (459e12, 2.76e12),
    "TPU v6": (918e12, 1.64e12),
    "H200": (989e12, 4.8e12),
    "H100": (989e12, 3.35e12),
    "A100": (312e12, 2.0e12),
}


def peak(device=None) -> tuple[float, float] | None:
    """(FLOP/s, bytes/s) at the peak of `device` (default: JAX's first), or
    None where PEAKS does not know it: a CPU, whose peak depends on the
    processor, the cores and the vector units, or a chip not listed."""
    if device is None:
        import jax  # only here: drawing a stored measurement needs no JAX

        device = jax.devices()[0]
    if device.platform == "cpu":
        return None
    return next((p for name, p in PEAKS.items() if name in device.device_kind), None)


def share(amount, seconds, rate) -> str:
    """`amount` (FLOPs or bytes) in `seconds` as a share of `rate` (per
    second), for a table cell; "-" where the rate or the amount is unknown."""
    if not rate or amount is None or not seconds:
        return "-"
    return f"{100 * amount / seconds / rate:.3g}%"  # 3 digits: 0.0123% as much as 45.6%


def peak_note(device=None) -> str:
    """What the table's shares of peak are shares of, or why there are none."""
    if device is None:
        import jax

        device = jax.devices()[0]
    found = peak(device)
    if found is None:
        why = "no peak for the CPU" if device.platform == "cpu" else "not in PEAKS"
        return f"share of peak: not known on {device.device_kind!r} ({why}, benchmarks/plot.py)"
    flops, bandwidth = found
    return (
        f"share of peak: of {device.device_kind}'s {flops / 1e12:g} TFLOP/s (dense bfloat16)"
        f" and {bandwidth / 1e9:g} GB/s (HBM)"
    )


def require_matplotlib():
    """Exit with the install command now, before minutes of measuring, if it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(INSTALL)


def machine() -> str:
    """Where and when the numbers were measured, for the plot's footnote."""
    import jax  # only here: drawing a stored measurement needs no JAX

    device = jax.devices()[0]
    kind = device.device_kind
    if device.platform == "cpu":  # device_kind is just "cpu": name the processor
        cpuinfo = Path("/proc/cpuinfo")
        models = (
            re.findall(r"model name\s*:\s*(.+)", cpuinfo.read_text()) if cpuinfo.exists() else []
        )
        kind = models[0].strip() if models else platform.processor() or platform.machine()
    where = f"{device.platform} ({kind}), {os.cpu_count()} host CPUs"
    day = datetime.date.today().isoformat()
    return f"{where}; JAX {jax.__version__}; measured {day}"


def copy_bandwidth(megabytes: int = 64, repeats: int = 20) -> float:
    """Bytes per second a jitted copy of a float32 array moves (read + write),
    median of `repeats`. A memory-bound op's bytes moved over this is what a
    plain copy of as many bytes takes: a yardstick, not a bound, since a copy of
    `megabytes` runs out of cache while a small op's data can stay in it."""
    import statistics
    import time

    import jax
    import jax.numpy as jnp

    x = jnp.ones(megabytes * 2**20 // 4, jnp.float32)
    copy = jax.jit(lambda a: a * 1.0)  # not elided: a multiply, then a new buffer
    jax.block_until_ready(copy(x))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(copy(x))
        times.append(time.perf_counter() - start)
    return 2 * x.nbytes / statistics.median(times)


@dataclass
class Panel:
    """One set of axes: each series maps a name to (xs, ys); each guide (a
    yardstick such as a copy of the same bytes, drawn dashed and grey) likewise.
    Read back, the values are SVG coordinates."""

    title: str
    xlabel: str
    ylabel: str
    series: dict = field(default_factory=dict)
    guides: dict = field(default_factory=dict)
    log: bool = True


def write_plot(path, panels: list[Panel], note: str = "") -> None:
    """Draw the panels side by side, each series a line with markers, on log axes
    unless a panel says otherwise; `note` (the machine and date) goes underneath."""
    import matplotlib

    matplotlib.use("svg")  # no display needed
    matplotlib.rcParams["svg.hashsalt"] = "bench"  # the same SVG for the same numbers
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, readable back
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for i, (panel, ax) in enumerate(zip(panels, axes[0], strict=True)):
        for kind, lines in (("series", panel.series), ("guide", panel.guides)):
            for name, (xs, ys) in lines.items():
                if len(xs) == 0 or len(xs) != len(ys):
                    raise ValueError(f"{name!r} has {len(xs)} sizes and {len(ys)} values")
                style = {"marker": "o"} if kind == "series" else {"ls": "--", "c": "grey"}
                # A line reads left to right, whatever order the sizes came in.
                xs, ys = zip(*sorted(zip(xs, ys, strict=True)), strict=True)
                (line,) = ax.plot(xs, ys, label=name, **style)
                line.set_gid(f"panel{i}:{kind}:{name}")
        if panel.log:
            ax.set_xscale("log")
            ax.set_yscale("log")
            _label_log_ticks(ax)
        ax.set_title(panel.title)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        for part, artist in (("title", ax.title), ("xlabel", ax.xaxis.label)):
            artist.set_gid(f"panel{i}:{part}")
        ax.yaxis.label.set_gid(f"panel{i}:ylabel")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    if note:
        fig.text(0.01, 0.01, note, fontsize="x-small", color="dimgrey")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, metadata={"Date": None, "Description": note or None})
    plt.close(fig)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Where to label a log axis spanning lo..hi: 1, 2 and 5 in each decade
    over 2.5 decades or less (1 to 9 if that leaves fewer than two), else the
    decades, every other one past six; few enough that labels never overlap.
    Empty when no such value falls in the range."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = range(first, last + 1)
    wide = math.log10(hi / lo) > 2.5
    stride = 2 if wide and last - first > 6 else 1
    for steps in ((1,),) if wide else ((1, 2, 5), range(1, 10)):
        values = [float(f"{m}e{d}") for d in decades[::stride] for m in steps]
        values = [v for v in values if lo <= v <= hi]
        if len(values) >= 2:
            break
    return values


def _label_log_ticks(ax) -> None:
    """Plain numbers (0.2, 5, 1000) at log_ticks, instead of matplotlib's
    powers of ten at every minor tick, which overlap on a narrow range."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        ticks = log_ticks(lo, hi)
        if ticks:  # else matplotlib's own
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_minor_formatter(NullFormatter())


def _text(group) -> str:
    return "".join(group.itertext()).strip()


def _points(group) -> list[tuple[float, float]]:
    """The vertices of a line's path (matplotlib writes 'M x y L x y ...')."""
    path = group.find(f"{SVG}path")
    d = path.get("d", "") if path is not None else ""
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]
    pairs = zip(numbers[0::2], numbers[1::2], strict=False)
    return [p for p in pairs if all(math.isfinite(v) for v in p)]


def read_plot(path) -> list[Panel]:
    """Read back what write_plot drew: per panel its labels and each line's vertices."""
    panels: dict[int, Panel] = {}
    for group in ET.parse(Path(path)).getroot().iter(f"{SVG}g"):
        match = re.fullmatch(r"panel(\d+):(\w+)(?::(.+))?", group.get("id", ""))
        if not match:
            continue
        panel = panels.setdefault(int(match[1]), Panel("", "", ""))
        kind, name = match[2], match[3]
        if kind in ("series", "guide"):
            getattr(panel, "series" if kind == "series" else "guides")[name] = _points(group)
        else:
            setattr(panel, kind, _text(group))
    return [panels[i] for i in sorted(panels)]
