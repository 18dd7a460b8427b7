"""Time the primitive, forward and value-and-grad, jitted, against what it
replaces: its own formula written inline without a primitive, `_compute` in

    src/{{ cookiecutter.package_name }}/{{ cookiecutter.op_name }}.py

and the plain-JAX reference (the tests' oracle). The operands are those of
the conformance matrix (tests/op_spec.py), every axis scaled up. Speed goals
live here, never in tests.

A primitive is not climbed for speed: one that lowers to existing StableHLO
compiles to the same program as its formula inline, so expect about 1x there.
It buys an atomic operation with rules of your choosing (one jaxpr equation,
its own batching, transpose and errors); the table shows what it costs at run
time.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg   # and draw it

The plot (benchmarks/plot.py, needs matplotlib: the `bench` extra) has a panel
per pass, forward and value_and_grad: the median time of each against the
bytes the pass reads and writes at least (its operands, its results), log
axes, with the time a jitted copy of the same bytes takes, dashed: a
yardstick, not a bound (data that stays in cache can beat it).

Where the chip's peak is known (benchmarks/plot.py PEAKS: a TPU or a GPU, not
a CPU), the primitive's bytes moved per second is printed as a share of the
chip's peak bandwidth: the roof of an op with a few FLOPs per element.
"""

import argparse
import dataclasses
import sys
from pathlib import Path

import jax
import numpy as np

from {{ cookiecutter.package_name }}.{{ cookiecutter.op_name }} import _compute

# The op's declaration: its operands' axes, and the op and its reference
# (tests/op_spec.py; it changes no JAX setting: the benchmark runs on the
# default device).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import plot  # noqa: E402  (benchmarks/plot.py, next to this file)
from conformance import make_args  # noqa: E402
from op_spec import SPEC  # noqa: E402
from timing import median_seconds  # noqa: E402  (benchmarks/timing.py)

PASSES = ("forward", "value_and_grad")
SERIES = ("primitive", "formula inline", "reference")


def value_and_grad(f):
    argnums = tuple(i for i, a in enumerate(SPEC.args) if a.differentiable)

    def loss(*args):
        outputs = f(*args)
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        return sum(jax.numpy.sum(jax.numpy.sin(o)) for o in outputs)

    return jax.jit(jax.value_and_grad(loss, argnums=argnums))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--plot", metavar="FILE.svg", help="also draw the times (matplotlib)")
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()  # before minutes of measuring
    # Each axis of the conformance sizes times the scale.
    scales = [4] if args.quick else [2, 4, 8, 16, 32]
    repeats = 3 if args.quick else args.repeats
    # The quick run is a smoke test (CI, tests/test_bench_plot.py): its repeats, no more.
    seconds = 0.0 if args.quick else 0.5
    # For the plot: per pass, per series, (megabytes moved, milliseconds), and
    # per pass the milliseconds a copy of as many bytes takes.
    drawn = {name: {series: ([], []) for series in SERIES} for name in PASSES}
    copies = {name: ([], []) for name in PASSES}
    bandwidth = plot.copy_bandwidth(8 if args.quick else 64) if args.plot else None

    device = jax.devices()[0]
    chip = plot.peak(device)  # (FLOP/s, bytes/s), or None: not known (a CPU)
    print(
        f"jax {jax.__version__} on {device.platform} ({device.device_kind}); median of at "
        f"least {repeats} runs; primitive and formula in turn"
    )
    print(
        f"{'sizes':>16} {'pass':>15} {'primitive ms':>13} {'formula ms':>10} "
        f"{'vs formula':>10} {'reference ms':>12} {'vs ref':>8} {'B/s share':>10}"
    )
    rng = np.random.default_rng(0)
    for scale in scales:
        sizes = {axis: size * scale for axis, size in SPEC.sizes.items()}
        operands = make_args(dataclasses.replace(SPEC, sizes=sizes), rng)
        label = ", ".join(f"{axis}={size}" for axis, size in sizes.items())
        dtype = operands[0].dtype
        for name, wrap in (("forward", jax.jit), ("value_and_grad", value_and_grad)):
            # The least the pass reads and writes: its operands and its results.
            results = jax.tree.leaves(jax.eval_shape(wrap(SPEC.op), *operands))
            nbytes = sum(a.nbytes for a in operands) + sum(
                r.size * r.dtype.itemsize for r in results
            )
            # The primitive against the formula, in turn; the reference (which
            # may be far slower) apart, so that it does not decide their ratio.
            fns = [wrap(SPEC.op), wrap(_compute)]
            t_prim, t_formula = median_seconds(fns, operands, repeats, seconds=seconds)
            (t_ref,) = median_seconds([wrap(SPEC.reference)], operands, repeats, seconds=seconds)
            for series, t in zip(SERIES, (t_prim, t_formula, t_ref), strict=True):
                drawn[name][series][0].append(nbytes / 1e6)
                drawn[name][series][1].append(t * 1e3)
            if bandwidth:
                copies[name][0].append(nbytes / 1e6)
                copies[name][1].append(nbytes / bandwidth * 1e3)
            print(
                f"{label:>16} {name:>15} {1e3 * t_prim:>13.3f} {1e3 * t_formula:>10.3f} "
                f"{t_formula / t_prim:>9.2f}x {1e3 * t_ref:>12.3f} {t_ref / t_prim:>7.1f}x "
                f"{plot.share(nbytes, t_prim, chip and chip[1]):>10}"
            )
    print("vs X: X's time / the primitive's (above 1 means the primitive wins)")
    print(
        "B/s share: the primitive's least bytes moved (operands read, results written) per"
        " second, as a share of the chip's peak bandwidth"
    )
    print(plot.peak_note(device))
    if args.plot:
        panels = [
            plot.Panel(
                title=f"{name}, jitted, {dtype}",
                xlabel="bytes moved (MB: operands read, results written)",
                ylabel="median time (ms)",
                series=drawn[name],
                guides={f"copy of the same bytes ({bandwidth / 1e9:.3g} GB/s)": copies[name]},
            )
            for name in PASSES
        ]
        plot.write_plot(args.plot, panels, note=plot.machine())
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
