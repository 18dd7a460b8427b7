"""Bytes moved by collectives, and compile time, with and without the
sharding rule, for sharded inputs. Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs

On the simulated CPU devices wall time says little (they share the host's
cores), so times are printed only on a real multi-device platform.
"""

import argparse
import statistics
import time

import jax

# Simulate 8 devices on a CPU-only host; this must run before the backend
# starts, and does nothing to GPU or TPU devices.
jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from {{ cookiecutter.package_name }} import top_k, top_k_reference  # noqa: E402
from {{ cookiecutter.package_name }}.hlo import collective_bytes  # noqa: E402

K = 8


def compile_seconds_and_bytes(fn, x):
    start = time.perf_counter()
    text = jax.jit(fn).lower(x).compile().as_text()
    return time.perf_counter() - start, collective_bytes(text)


def median_seconds(fn, x, repeats):
    fn = jax.jit(fn)
    jax.block_until_ready(fn(x))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    n = len(jax.devices())
    mesh_shape = (2, n // 2) if n >= 2 else (1, 1)
    mesh = jax.make_mesh(mesh_shape, ("batch", "items"), axis_types=(AxisType.Auto,) * 2)
    sizes = [(64, 4096)] if args.quick else [(64, 4096), (256, 32768), (1024, 65536)]
    timed = jax.default_backend() != "cpu"
    print(f"jax {jax.__version__}, {n} {jax.default_backend()} devices, mesh {mesh_shape}, k={K}")
    print(
        f"{'shape':>14} {'spec':>22} {'rule bytes':>11} {'no-rule bytes':>14} {'ratio':>8} "
        f"{'compile s (rule / no rule)':>27}"
    )
    with jax.set_mesh(mesh):
        for shape in sizes:
            host = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            for spec in (P("batch", None), P("batch", "items")):
                x = jax.device_put(host, NamedSharding(mesh, spec))
                rule = lambda x: top_k(x, K)  # noqa: E731
                plain = lambda x: top_k_reference(x, K)  # noqa: E731
                t_rule, b_rule = compile_seconds_and_bytes(rule, x)
                t_plain, b_plain = compile_seconds_and_bytes(plain, x)
                ratio = f"{b_plain / b_rule:.0f}x" if b_rule else "all"
                print(
                    f"{str(shape):>14} {str(spec):>22} {b_rule:>11,} {b_plain:>14,} {ratio:>8} "
                    f"{t_rule:>13.2f} / {t_plain:.2f}"
                )
                if timed:
                    run_rule = median_seconds(rule, x, args.repeats)
                    run_plain = median_seconds(plain, x, args.repeats)
                    print(
                        f"{'':>14} run ms: rule {1e3 * run_rule:.3f}, no rule "
                        f"{1e3 * run_plain:.3f}, speed-up {run_plain / run_rule:.2f}x"
                    )
    print("bytes: per-device result size of every collective in the compiled program")
    print("ratio: no-rule bytes / rule bytes ('all' = the rule needs no collective)")


if __name__ == "__main__":
    main()
