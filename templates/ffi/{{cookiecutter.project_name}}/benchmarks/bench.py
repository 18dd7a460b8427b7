"""Time the FFI handler against jax.jit of the plain-JAX reference, forward and
forward+backward, and the FFI handler's bandwidth against a memory copy.
Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes, float32
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg   # and draw the plot

--plot FILE.svg also times both sides over a sweep of row counts (rows of
PLOT_COLS elements) and draws time against the bytes the op must move,
forward and forward+backward, log axes, with a dashed guide: what a jitted
copy of those bytes takes on this machine, out of cache (a yardstick, not a
bound; benchmarks/plot.py; needs matplotlib, the `bench` extra).

Both sides run the same way: jitted, on arrays already on the device, after
a warm-up call, timed with block_until_ready. The two are timed in alternation
so that drift on a shared machine hits both alike; the median is reported.
Freeing each result happens outside the timed region: XLA runs a program
with no counted FLOPs (one FFI call) inline on the Python thread and frees
its results there, but frees the reference's on a worker thread, so timing
the frees would charge the FFI side alone.

Bandwidth: the bytes the op must move at least (read x, write y; the
backward also reads x and the cotangent and writes dx) over its time, as a
fraction of what a copy of x reaches on the op's device. The copies are
jitted XLA programs on the device that holds x (the first of jax.devices():
a GPU where there is one), timed exactly like the two ops, in the same
alternation (warm-up, block_until_ready, median):

- "of copy": a copy into a buffer already in use (donated to the copy, so
  XLA writes into it: no allocation, no page faults), about what the
  device's memory can stream;
- "of fresh": a copy into a fresh output that XLA allocates, as it does the
  op's own output.

A row-wise op like this one is usually memory-bound, so these fractions, not
FLOPs, say how much is left to gain. On a CPU device the line under each row
also gives two one-thread NumPy copies of the same bytes (into memory in use,
and into a new array, for which NumPy asks for transparent huge pages), the
host's streaming limit{% if cookiecutter.example != "none" %} the README's measurements quote{% endif %}.

Much of the time for 64 MB of fresh output on a CPU is the kernel's page
{% if cookiecutter.example != "none" -%}
faults: the handler asks for huge pages on its output and pre-faults it (see
csrc/huge_pages.h), while XLA's buffers, the fresh copy's included, take 4 KiB
{%- else -%}
faults (a handler may ask for huge pages on its output and pre-fault it), and
XLA's buffers, the fresh copy's included, take 4 KiB
{%- endif %}
faults unless GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (on Linux with glibc) asks
for huge pages for them too.
"""

import argparse
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from {{ cookiecutter.package_name }} import cuda_available
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }} as op
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}_reference as reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot  # noqa: E402  (benchmarks/plot.py: draws; matplotlib only when drawing)
from timing import median_seconds  # noqa: E402  (benchmarks/timing.py)

# Seconds to wait after each timed call, its result freed: a worker thread
# freeing the reference's result is then not timed (see above).
FREE_PAUSE = 0.005

# The plot's sweep: rows of PLOT_COLS elements, PLOT_ROWS of them (16 MB of
# float32 at the largest), and a small sweep for --quick.
PLOT_COLS = 1024
PLOT_ROWS = (64, 256, 1024, 4096)
QUICK_PLOT_COLS = 256
QUICK_PLOT_ROWS = (64, 256)


def forward_and_backward(f):
    """y and the VJP of a cotangent g: what one training step asks of the op."""

    def run(x, g):
        y, vjp = jax.vjp(f, x)
        return y, vjp(g)[0]

    return jax.jit(run)


def copies(x):
    """Two jitted copies of x on x's device, timed like the op (each takes the
    op's operands and copies the first): into a buffer already in use, and into
    a fresh output."""
    fresh = jax.jit(lambda src: src * 1)  # a multiply, so never elided: a new buffer
    # Donating the buffer lets XLA write the copy into it (keep_unused keeps the
    # unread argument, so that it can be donated).
    into = jax.jit(lambda src, dst: src * 1, donate_argnums=1, keep_unused=True)
    used = [fresh(x)]  # written once here, so later copies into it take no faults

    def copy_into_used(src, *_):
        used[0] = into(src, used[0])
        return used[0]

    def copy_into_fresh(src, *_):
        return fresh(src)

    return [copy_into_used, copy_into_fresh]


def host_copies(nbytes):
    """Two one-thread NumPy copies of nbytes on the host: into memory in use,
    and into a fresh array."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)  # written once here, so copies into it take no page faults

    def copy_into_used(*_):
        np.copyto(dst, src)

    def copy_into_fresh(*_):
        return src.copy()

    return [copy_into_used, copy_into_fresh]


def max_error(got, want):
    got = [np.asarray(v, np.float64) for v in jax.tree.leaves(got)]
    want = [np.asarray(v, np.float64) for v in jax.tree.leaves(want)]
    return max(float(np.max(np.abs(a - b))) for a, b in zip(got, want, strict=True))


def bench_device(first, cuda):
    """Where to measure: first (jax.devices()[0]) where this build has a handler
    for its platform (the CPU's always, a GPU's if cuda), else the first CPU: a
    build without the CUDA handler is measured on the CPU of a GPU machine."""
    handled = {"cpu", "gpu"} if cuda else {"cpu"}
    return first if first.platform in handled else jax.devices("cpu")[0]


def operands(rng, shape, dtype, device):
    """x and a cotangent g on device, where the op and the copies then run."""
    return [jax.device_put(jnp.asarray(rng.standard_normal(shape), dtype), device) for _ in "xg"]


def cases(x, g, nbytes):
    """(name, FFI side, reference side, operands, bytes moved at least) per pass."""
    return [
        ("forward", jax.jit(op), jax.jit(reference), (x,), 2 * nbytes),
        ("fwd+bwd", forward_and_backward(op), forward_and_backward(reference), (x, g), 5 * nbytes),
    ]


def sweep(rows_list, cols, dtype, repeats, rng, device):
    """Times of both sides over row counts: {pass: (rows, ffi s, ref s, bytes moved)}."""
    measured = {}
    for rows in rows_list:
        nbytes = rows * cols * dtype.itemsize
        x, g = operands(rng, (rows, cols), dtype, device)
        for name, ffi, ref, inputs, moved in cases(x, g, nbytes):
            t_ffi, t_ref = median_seconds([ffi, ref], inputs, repeats, pause=FREE_PAUSE)
            measured.setdefault(name, []).append((rows, t_ffi, t_ref, moved))
    return measured


def draw(path, measured, cols, dtype, bandwidth, note):
    """Time against bytes moved per pass: the FFI handler, jax.jit(reference),
    and a jitted copy of the same bytes at the measured bandwidth, dashed."""
    titles = {
        "forward": "forward: y = op(x)",
        "fwd+bwd": "value and gradient: y and dx (jax.vjp)",
    }
    xlabels = {
        "forward": "bytes moved (MB: x read, y written)",
        "fwd+bwd": "bytes moved (MB: x and the cotangent read, y and dx written)",
    }
    panels = []
    for name, points in measured.items():
        megabytes = [p[3] / 1e6 for p in points]
        panels.append(
            plot.Panel(
                title=f"{titles[name]}, rows of {cols} {dtype.name}",
                xlabel=xlabels[name],
                ylabel="median time (ms)",
                series={
                    "FFI handler": (megabytes, [1e3 * p[1] for p in points]),
                    "jax.jit(reference)": (megabytes, [1e3 * p[2] for p in points]),
                },
                guides={
                    f"copy of the same bytes ({bandwidth / 1e9:.3g} GB/s)": (
                        megabytes,
                        [1e3 * p[3] / bandwidth for p in points],
                    )
                },
            )
        )
    plot.write_plot(path, panels, note=note)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    parser.add_argument(
        "--plot",
        metavar="FILE.svg",
        help="also sweep the row count and draw time against bytes moved",
    )
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()  # before minutes of measuring
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    sizes = [(512, 512)] if args.quick else [(4096, 4096), (65536, 256), (256, 65536)]
    repeats = 3 if args.quick else args.repeats
    dtype = jnp.dtype(args.dtype)

    first = jax.devices()[0]
    device = bench_device(first, cuda_available())
    if device != first:
        print(f"this build has no handler for {first.platform}: measuring on {device}")
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    print(
        f"jax {jax.__version__} on {device.platform} ({device.device_kind}; "
        f"{os.cpu_count()} host CPUs), {dtype.name}, median of {repeats} runs"
        + (f", GLIBC_TUNABLES={tunables}" if tunables else "")
    )
    print(
        f"{'rows x cols':>12} {'pass':>9} {'ffi ms':>8} {'ref ms':>8} {'speed-up':>8} "
        f"{'ffi GB/s':>8} {'of copy':>8} {'of fresh':>8} {'ref GB/s':>8} {'max |diff|':>10}"
    )
    rng = np.random.default_rng(0)
    for rows, cols in sizes:
        nbytes = rows * cols * dtype.itemsize
        x, g = operands(rng, (rows, cols), dtype, device)
        for name, ffi, ref, inputs, moved in cases(x, g, nbytes):
            error = max_error(ffi(*inputs), ref(*inputs))
            # Both ops and the copies, in one alternation: a shared machine's
            # drift hits all of them alike.
            host = host_copies(nbytes) if device.platform == "cpu" else []
            fns = [ffi, ref, *copies(x), *host]
            t_ffi, t_ref, *t_copies = median_seconds(fns, inputs, repeats, pause=FREE_PAUSE)
            used, fresh, *numpy = (2 * nbytes / t for t in t_copies)
            print(
                f"{f'{rows} x {cols}':>12} {name:>9} {1e3 * t_ffi:>8.2f} {1e3 * t_ref:>8.2f} "
                f"{t_ref / t_ffi:>7.2f}x {moved / t_ffi / 1e9:>8.1f} {moved / t_ffi / used:>8.0%} "
                f"{moved / t_ffi / fresh:>8.0%} {moved / t_ref / 1e9:>8.1f} {error:>10.2e}"
            )
            print(
                f"{'':>12} {'copies':>9}  GB/s, jitted on {device.platform}: {used / 1e9:.1f} "
                f"into a buffer in use (of copy), {fresh / 1e9:.1f} into a fresh output (of fresh)"
                + (
                    f"; host NumPy: {numpy[0] / 1e9:.1f} into memory in use, "
                    f"{numpy[1] / 1e9:.1f} into a fresh array"
                    if numpy
                    else ""
                )
            )
    print("speed-up: reference time / FFI time (above 1 means the FFI handler is faster)")
    print(
        "of copy, of fresh: the FFI handler's bytes moved per second over a jitted copy's "
        f"(read + write) on the same {device.platform} device"
    )
    if args.plot:
        cols, rows_list = (
            (QUICK_PLOT_COLS, QUICK_PLOT_ROWS) if args.quick else (PLOT_COLS, PLOT_ROWS)
        )
        measured = sweep(rows_list, cols, dtype, repeats, rng, device)
        quick_copy = {"megabytes": 8, "repeats": 5} if args.quick else {}
        with jax.default_device(device):  # the guide's copy, on the op's device
            bandwidth = plot.copy_bandwidth(**quick_copy)
        note = plot.machine() + ("" if device == first else f"; measured on {device}")
        draw(args.plot, measured, cols, dtype, bandwidth, note)
        print(f"plot: {args.plot} (rows {', '.join(map(str, rows_list))} of {cols} elements)")


if __name__ == "__main__":
    main()
