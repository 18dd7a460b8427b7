"""Time value-and-grad of the custom rule against autodiff of the reference,
and compare the compiled programs' memory. Speed goals live here, never in tests.
The op, its arguments and the sizes come from the declaration, tests/op_spec.py
(SPEC and BENCH_SIZES), so this file needs no edit for another op.

    python benchmarks/bench.py                            # default sizes
    python benchmarks/bench.py --quick                    # a small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg  # the table, and a plot of it

The plot (benchmarks/plot.py; needs matplotlib, the `bench` extra) has two
panels against the bytes the op must move: the time of each side, with what a
copy of those bytes takes at this machine's copy bandwidth (dashed), and each
side's peak memory of the compiled program, with the arguments and outputs
that both hold (dashed): the gap above that line is a side's temporaries.

Both sides are timed in the same run, call by call in turn (so a busy machine
slows both alike), after a warm-up; the figure is the median. Where the chip's
peak is known (benchmarks/plot.py PEAKS: a TPU or a GPU, not a CPU), the custom
rule's bytes moved per second is printed as a share of the peak bandwidth and,
where tests/op_spec.py declares bench_flops, its FLOP/s as a share of the peak
FLOP/s.
"""

import argparse
import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import op_spec  # noqa: E402  (the declaration, beside the tests)
import plot  # noqa: E402  (benchmarks/plot.py: imports matplotlib only to draw)
from conformance import cotangents_for, make_args  # noqa: E402
from timing import median_seconds  # noqa: E402  (benchmarks/timing.py)


def value_and_grad(f):
    """jit(value_and_grad) of the outputs weighted by random cotangents (the
    first argument, as in a training step's backward pass), with respect to
    every differentiable argument of f."""
    argnums = tuple(1 + i for i, a in enumerate(op_spec.SPEC.args) if a.differentiable)

    def loss(cotangents, *args):
        outputs = f(*args)
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        return sum(jnp.sum(c * o) for c, o in zip(cotangents, outputs, strict=False))

    return jax.jit(jax.value_and_grad(loss, argnums=argnums))


def in_out_bytes(compiled):
    """Arguments + outputs of the compiled program, less what they alias: what
    any program with the op's signature holds (XLA's estimate)."""
    stats = compiled.memory_analysis()
    return stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes


def peak_bytes(compiled):
    """Arguments + outputs + temporaries of the compiled program (XLA's estimate)."""
    return in_out_bytes(compiled) + compiled.memory_analysis().temp_size_in_bytes


def bytes_moved(spec, inputs):
    """The least the backward pass must move, from the sizes and dtypes alone:
    the op's inputs and its cotangents read, its outputs and the gradients
    written (one per differentiable argument). `inputs` is (cotangents, *args)."""
    cotangents, *args = inputs
    outputs = jax.eval_shape(spec.op, *args)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    gradients = [a for a, arg in zip(args, spec.args, strict=True) if arg.differentiable]
    arrays = [*args, *cotangents, *outputs, *gradients]
    return sum(int(np.prod(a.shape)) * jnp.dtype(a.dtype).itemsize for a in arrays)


def draw(path, rows, bandwidth):
    """Two panels against the bytes moved: time and peak memory, each with a
    dashed guide (a copy of the same bytes; the arguments + outputs)."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    mb = [r["bytes"] / 1e6 for r in rows]
    ran = [r for r in rows if r["t_reference"] is not None]
    xlabel = "bytes moved (MB: inputs, outputs, cotangents, gradients)"
    timing = plot.Panel(
        "jit(value_and_grad) time",
        xlabel,
        "median time (ms)",
        series={
            "custom rule": (mb, [1e3 * r["t_custom"] for r in rows]),
            "reference (autodiff)": (
                [r["bytes"] / 1e6 for r in ran],
                [1e3 * r["t_reference"] for r in ran],
            ),
        },
        guides={
            f"copy of the same bytes ({bandwidth / 1e9:.3g} GB/s)": (
                mb,
                [1e3 * b * 1e6 / bandwidth for b in mb],
            )
        },
    )
    memory = plot.Panel(
        "compiled program's peak memory (memory_analysis)",
        xlabel,
        "bytes (MB)",
        series={
            "custom rule, peak": (mb, [r["peak_custom"] / 1e6 for r in rows]),
            "reference, peak": (mb, [r["peak_reference"] / 1e6 for r in rows]),
        },
        # Both programs take the same arguments and return the same outputs.
        guides={"arguments + outputs (both)": (mb, [r["in_out"] / 1e6 for r in rows])},
    )
    note = f"{plot.machine()}; peak = arguments + outputs + temporaries"
    plot.write_plot(path, [timing, memory], note=note)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--max-reference-gb",
        type=float,
        default=4.0,
        help="compile but do not run the reference when it needs more than this",
    )
    parser.add_argument("--plot", metavar="FILE.svg", help="also draw the results (matplotlib)")
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()  # now, not after minutes of measuring
    spec = op_spec.SPEC
    sizes = getattr(op_spec, "BENCH_SIZES", [dict(spec.sizes)])
    sizes = sizes[:1] if args.quick else sizes[1:] or sizes
    repeats = 3 if args.quick else args.repeats

    device = jax.devices()[0]
    chip = plot.peak(device)  # (FLOP/s, bytes/s), or None: not known (a CPU)
    flops_of = getattr(op_spec, "bench_flops", None)
    print(
        f"jax {jax.__version__} on {device.platform} ({device.device_kind}); median of at "
        f"least {repeats} runs, the two sides in turn"
    )
    print(
        f"{'sizes':>24} {'custom ms':>10} {'reference ms':>13} {'speed-up':>9} "
        f"{'custom MB':>10} {'reference MB':>13} {'memory ratio':>13} "
        f"{'FLOP/s share':>13} {'B/s share':>10}"
    )
    rng = np.random.default_rng(0)
    rows = []
    for size in sizes:
        sized = dataclasses.replace(spec, sizes=size)
        inputs = make_args(sized, rng)
        inputs = (cotangents_for(sized, inputs, rng), *inputs)
        custom = value_and_grad(spec.op).lower(*inputs).compile()
        reference = value_and_grad(spec.reference).lower(*inputs).compile()
        b_custom, b_reference = peak_bytes(custom), peak_bytes(reference)
        if b_reference <= args.max_reference_gb * 1e9:
            t_custom, t_reference = median_seconds(
                [custom, reference], inputs, repeats, seconds=0.5
            )
            timing = f"{1e3 * t_reference:>13.2f} {t_reference / t_custom:>8.2f}x"
        else:
            (t_custom,) = median_seconds([custom], inputs, repeats, seconds=0.5)
            t_reference = None
            timing = f"{'not run':>13} {'':>9}"
        moved = bytes_moved(spec, inputs)
        flops = flops_of(size) if flops_of else None
        rows.append(
            {
                "bytes": moved,
                "t_custom": t_custom,
                "t_reference": t_reference,
                "peak_custom": b_custom,
                "peak_reference": b_reference,
                "in_out": in_out_bytes(custom),
            }
        )
        label = ", ".join(f"{axis}={n}" for axis, n in size.items())
        print(
            f"{label:>24} {1e3 * t_custom:>10.2f} {timing} {b_custom / 1e6:>10.1f} "
            f"{b_reference / 1e6:>13.1f} {b_reference / b_custom:>12.2f}x "
            f"{plot.share(flops, t_custom, chip and chip[0]):>13} "
            f"{plot.share(moved, t_custom, chip and chip[1]):>10}"
        )
    print("speed-up and memory ratio: reference / custom (above 1 means the custom rule wins)")
    print(
        "FLOP/s, B/s share: the custom rule's "
        + ("FLOPs (bench_flops)" if flops_of else "FLOPs (none declared: bench_flops)")
        + " and least bytes moved, per second, as a share of the chip's peak"
    )
    print(plot.peak_note(device))
    if any(r["t_reference"] is None for r in rows):
        gb = args.max_reference_gb
        print(f"reference 'not run': its compiled program needs more than {gb} GB")
    if args.plot:
        if all(r["t_reference"] is None for r in rows):
            sys.exit("--plot: the reference ran at no size; raise --max-reference-gb")
        draw(args.plot, rows, plot.copy_bandwidth(megabytes=16 if args.quick else 64))
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
