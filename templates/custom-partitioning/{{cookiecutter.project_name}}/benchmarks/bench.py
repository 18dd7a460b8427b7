"""Bytes moved by collectives, and compile time, with and without the
sharding rule, for sharded inputs: the op that tests/op_spec.py declares
against its plain-JAX reference. Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg  # also draw the plot

The plot (`--plot FILE.svg`, needs matplotlib: the `bench` extra) shows, for
1, 2, 4 and 8 shards of the second named axis (a 1 x shards mesh), the bytes
the collectives move on each device and the median run time, for the op and
its reference side by side.

The inputs are the declaration's arguments with their first two named axes
scaled up, on a 2 x (devices / 2) mesh whose axes carry those names: each
input sharded over the first axis only, then over both. On the simulated CPU
devices wall time says little (they share the host's cores), so times are
printed only on a real multi-device platform. Needs the test dependencies
(the declaration lives with the tests).
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import jax

# Simulate 8 devices on a CPU-only host; this must run before the backend
# starts, and does nothing to GPU or TPU devices.
jax.config.update("jax_num_cpu_devices", 8)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from {{ cookiecutter.package_name }}.hlo import collective_bytes  # noqa: E402

from conformance import make_args  # noqa: E402
from op_spec import SPEC  # noqa: E402
from timing import median_seconds  # noqa: E402  (benchmarks/timing.py)

# How much larger than the conformance cells' sizes the two axes are.
SCALES = [(8, 256), (32, 2048), (128, 4096)]
# The plot: shard counts of the second axis, at which scale (--quick: SCALES[0]).
SHARDS = (1, 2, 4, 8)
PLOT_SCALE = (32, 2048)


def compile_seconds_and_bytes(fn, args):
    start = time.perf_counter()
    text = jax.jit(fn).lower(*args).compile().as_text()
    return time.perf_counter() - start, collective_bytes(text)


def scaled_args(scale):
    """The declaration's arguments (and their new sizes) with the first two
    named axes `scale` times larger."""
    first, second = SPEC.args[0].axes[:2]
    sizes = dict(SPEC.sizes)
    sizes[first] *= scale[0]
    sizes[second] *= scale[1]
    spec = dataclasses.replace(SPEC, sizes=sizes)
    return make_args(spec, np.random.default_rng(0))


def place(mesh, host, split):
    """Each argument on the mesh, its axes named in `split` sharded."""
    return [
        jax.device_put(a, NamedSharding(mesh, P(*(d if d in split else None for d in arg.axes))))
        for a, arg in zip(host, SPEC.args, strict=True)
    ]


def shard_sweep(scale, repeats):
    """For each shard count: collective bytes per device and median run
    seconds of the op and of its reference, the second axis sharded over a
    1 x shards mesh (for the plot)."""
    rule, plain = SPEC.auto_op or SPEC.op, SPEC.reference
    first, second = SPEC.args[0].axes[:2]
    host = scaled_args(scale)
    counts = [s for s in SHARDS if s <= len(jax.devices())]
    sweep = {"shards": counts, "bytes": ([], []), "seconds": ([], [])}
    for count in counts:
        mesh = jax.make_mesh(
            (1, count),
            (first, second),
            axis_types=(AxisType.Auto,) * 2,
            devices=jax.devices()[:count],
        )
        with jax.set_mesh(mesh):
            placed = place(mesh, host, (first, second))
            for i, fn in enumerate((rule, plain)):
                sweep["bytes"][i].append(compile_seconds_and_bytes(fn, placed)[1])
                sweep["seconds"][i].append(median_seconds([jax.jit(fn)], placed, repeats)[0])
    return sweep, tuple(host[0].shape)


def draw(path, sweep, shape):
    import plot

    second = SPEC.args[0].axes[1]
    xlabel = f"shards of axis {second!r} (devices)"
    names = ("the op (custom_partitioning)", "its reference (plain JAX)")
    xs = sweep["shards"]
    panels = [
        plot.Panel(
            title=f"Collectives, input {shape}",
            xlabel=xlabel,
            ylabel="collective bytes per device (B)",
            series={name: (xs, ys) for name, ys in zip(names, sweep["bytes"], strict=True)},
            log=False,  # the op's bytes may be 0
        ),
        plot.Panel(
            title=f"Run time, input {shape}",
            xlabel=xlabel,
            ylabel="median run time (ms)",
            series={
                name: (xs, [1e3 * t for t in ys])
                for name, ys in zip(names, sweep["seconds"], strict=True)
            },
        ),
    ]
    note = plot.machine()
    if jax.default_backend() == "cpu":
        note += "; simulated CPU devices share the host's cores"
    plot.write_plot(path, panels, note=note)
    print(f"plot: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--plot", metavar="FILE.svg", help="also draw the shard sweep")
    args = parser.parse_args()
    if args.plot:
        import plot

        plot.require_matplotlib()
    n = len(jax.devices())
    mesh_shape = (2, n // 2) if n >= 2 else (1, 1)
    first, second = SPEC.args[0].axes[:2]
    mesh = jax.make_mesh(mesh_shape, (first, second), axis_types=(AxisType.Auto,) * 2)
    rule, plain = SPEC.auto_op or SPEC.op, SPEC.reference
    timed = jax.default_backend() != "cpu"
    print(f"jax {jax.__version__}, {n} {jax.default_backend()} devices, mesh {mesh_shape}")
    print(
        f"{'shape':>14} {'spec':>14} {'rule bytes':>11} {'no-rule bytes':>14} {'ratio':>8} "
        f"{'compile s (rule / no rule)':>27}"
    )
    with jax.set_mesh(mesh):
        for scale in SCALES[:1] if args.quick else SCALES:
            host = scaled_args(scale)
            for split in ((first,), (first, second)):
                placed = place(mesh, host, split)
                t_rule, b_rule = compile_seconds_and_bytes(rule, placed)
                t_plain, b_plain = compile_seconds_and_bytes(plain, placed)
                ratio = f"{b_plain / b_rule:.0f}x" if b_rule else "all" if b_plain else "-"
                shape, layout = str(tuple(host[0].shape)), str(P(*split))
                print(
                    f"{shape:>14} {layout:>14} {b_rule:>11,} {b_plain:>14,} {ratio:>8} "
                    f"{t_rule:>13.2f} / {t_plain:.2f}"
                )
                if timed:
                    both = [jax.jit(rule), jax.jit(plain)]
                    run_rule, run_plain = median_seconds(both, placed, args.repeats)
                    print(
                        f"{'':>14} run ms: rule {1e3 * run_rule:.3f}, no rule "
                        f"{1e3 * run_plain:.3f}, speed-up {run_plain / run_rule:.2f}x"
                    )
    print("bytes: per-device result size of every collective in the compiled program")
    print("ratio: no-rule bytes / rule bytes ('all': the rule needs no collective; '-': neither)")
    if args.plot:
        repeats = 3 if args.quick else args.repeats
        sweep, shape = shard_sweep(SCALES[0] if args.quick else PLOT_SCALE, repeats)
        print(f"shard sweep, {shape} sharded over a 1 x shards mesh (the plot):")
        print(f"{'shards':>7} {'rule bytes':>11} {'no-rule bytes':>14}   run ms: rule / no rule")
        (rule_bytes, plain_bytes), (rule_s, plain_s) = sweep["bytes"], sweep["seconds"]
        for i, count in enumerate(sweep["shards"]):
            print(
                f"{count:>7} {rule_bytes[i]:>11,} {plain_bytes[i]:>14,} "
                f"{1e3 * rule_s[i]:>14.2f} / {1e3 * plain_s[i]:.2f}"
            )
        draw(args.plot, sweep, shape)


if __name__ == "__main__":
    main()
