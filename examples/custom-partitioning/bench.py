"""Bytes moved by collectives for a sharded prefix sum: the custom rule vs XLA's own partitioning.

    python examples/custom-partitioning/bench.py [--quick]

For each layout (mesh shape, PartitionSpec) and size, both versions are compiled for the same
sharded float32 input: `prefix_sum` (the rule) and `jnp.cumsum(x, axis=1)` (XLA alone), the
forward program and the gradient program (of sum(c * prefix sum), c sharded like x). Reported:

- bytes: the sum over the compiled program's collectives of each one's result size on one
  device (shared/hlo.py), so an all-gather counts the whole gathered array; and the ratio
  XLA / rule;
- compile: seconds for `jit(f).lower(x).compile()` of the forward program, median of a few,
  each a fresh function so that no cache answers;
- err: the rule's largest error as a fraction of the bound the tests use (reference.py),
  from one run against float64 NumPy: the numbers above are for a correct program.

Eight devices: the accelerator's if it has eight, otherwise eight simulated CPU devices. On
simulated devices all "communication" is memory copies inside one process and the eight
devices share the same cores, so wall time says nothing about a real cluster and is not
reported; on an accelerator both versions are also timed (warm-up, then the median of
repeated calls, each ended by `jax.block_until_ready`).
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from prefix_sum import prefix_sum
from reference import error_bound, prefix_sum_f64, prefix_sum_reference
from shared.devices import mesh_devices
from shared.hlo import collectives
from shared.timing import bench_arguments, median_seconds

# Before anything starts the backend: the CPU backend only reads this once.
jax.config.update("jax_num_cpu_devices", 8)

LAYOUTS = [((1, 8), P(None, "seq")), ((2, 4), P("rows", "seq"))]


def programs(prefix):
    forward = prefix

    def gradient(x, c):
        return jax.grad(lambda x: jnp.sum(prefix(x) * c))(x)

    return forward, gradient


def compile_seconds(fn, args, repeats):
    times = []
    for _ in range(repeats):
        fresh = lambda *a: fn(*a)  # noqa: E731  (a new function: no cached executable)
        start = time.perf_counter()
        jax.jit(fresh).lower(*args).compile()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bytes_moved(compiled):
    return sum(c.bytes for c in collectives(compiled.as_text()))


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def run_case(devices, mesh_shape, spec, rows, length, compile_repeats, time_repeats):
    mesh = jax.make_mesh(
        mesh_shape, ("rows", "seq"), axis_types=(AxisType.Auto,) * 2, devices=devices
    )
    sharding = NamedSharding(mesh, spec)
    rng = np.random.default_rng(rows * length)
    x_host = rng.standard_normal((rows, length)).astype(np.float32)
    with jax.set_mesh(mesh):
        x = jax.device_put(x_host, sharding)
        c = jax.device_put(rng.standard_normal((rows, length)).astype(np.float32), sharding)
        compiled, cells = {}, []
        for name, prefix in (("rule", prefix_sum), ("xla", prefix_sum_reference)):
            forward, gradient = programs(prefix)
            compiled[name] = (
                jax.jit(forward).lower(x).compile(),
                jax.jit(gradient).lower(x, c).compile(),
            )
        for i in range(2):  # forward, gradient
            rule, xla = (bytes_moved(compiled[name][i]) for name in ("rule", "xla"))
            cells.append(f"{human(rule):>10} {human(xla):>10} {xla / max(rule, 1):>7.0f}x")
        seconds = [
            compile_seconds(p, (x,), compile_repeats) for p in (prefix_sum, prefix_sum_reference)
        ]
        fraction = np.max(
            np.abs(np.asarray(compiled["rule"][0](x), np.float64) - prefix_sum_f64(x_host))
            / np.maximum(error_bound(x_host, np.float32), np.finfo(np.float64).tiny)
        )
        line = (
            f"{'x'.join(map(str, mesh_shape)):>5} {spec!s:<16} {rows:>5} {length:>8} | "
            f"{cells[0]} | {cells[1]} | {seconds[0]:>6.2f} {seconds[1]:>6.2f} | "
            f"{fraction:>5.1%}"
        )
        if devices[0].platform != "cpu":
            rule_s, xla_s = (
                median_seconds(compiled[name][0], (x,), time_repeats) for name in ("rule", "xla")
            )
            line += f" | {rule_s * 1e3:>8.3f} {xla_s * 1e3:>8.3f} {xla_s / rule_s:>6.2f}x"
    print(line, flush=True)


def main():
    args = bench_arguments(__doc__, quick="two sizes").parse_args()
    if args.quick:
        sizes, compile_repeats, time_repeats = [(8, 1 << 12), (64, 1 << 16)], 1, 20
    else:
        sizes = [(8, 1 << 12), (64, 1 << 16), (16, 1 << 20), (1024, 1 << 14)]
        compile_repeats, time_repeats = 3, 100

    devices = mesh_devices(8)
    platform = devices[0].platform
    print(f"jax {jax.__version__}; {len(devices)} {platform} devices; float32 input (rows, length)")
    print("bytes: per device, summed over the compiled program's collectives (result sizes);")
    print("ratio: xla / rule. compile: s, forward program. err: rule's error / test bound")
    header = (
        f"{'mesh':>5} {'spec':<16} {'rows':>5} {'length':>8} | "
        f"{'fwd rule':>10} {'fwd xla':>10} {'ratio':>8} | "
        f"{'grad rule':>10} {'grad xla':>10} {'ratio':>8} | "
        f"{'c rule':>6} {'c xla':>6} | {'err':>5}"
    )
    if platform == "cpu":
        print("(simulated CPU devices: wall time is not meaningful here and is not measured)")
    else:
        header += f" | {'rule ms':>8} {'xla ms':>8} {'ratio':>7}"
    print(header)
    for mesh_shape, spec in LAYOUTS:
        for rows, length in sizes:
            run_case(devices, mesh_shape, spec, rows, length, compile_repeats, time_repeats)


if __name__ == "__main__":
    main()
