"""Time value-and-grad of the custom rule against autodiff of the reference,
and compare the compiled programs' memory. Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from {{ cookiecutter.package_name }} import pairwise_distances, pairwise_distances_reference


def value_and_grad(f):
    # Random points never coincide, so the reference's gradient is finite here.
    def loss(x, y):
        return jnp.sum(jnp.exp(-f(x, y)))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def median_seconds(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_bytes(fn, args):
    """Arguments + outputs + temporaries of the compiled program (XLA's estimate)."""
    stats = fn.lower(*args).compile().memory_analysis()
    return (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
        + stats.temp_size_in_bytes
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    sizes = [(256, 256, 16)] if args.quick else [(512, 512, 16), (1024, 1024, 64), (2048, 256, 3)]
    repeats = 3 if args.quick else args.repeats

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; median of {repeats} runs")
    print(
        f"{'n, m, features':>16} {'custom ms':>10} {'reference ms':>13} {'speed-up':>9} "
        f"{'custom MB':>10} {'reference MB':>13} {'memory ratio':>13}"
    )
    rng = np.random.default_rng(0)
    for n, m, k in sizes:
        x = jnp.asarray(rng.standard_normal((n, k)), jnp.float32)
        y = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
        custom = value_and_grad(pairwise_distances)
        reference = value_and_grad(pairwise_distances_reference)
        t_custom = median_seconds(custom, (x, y), repeats)
        t_reference = median_seconds(reference, (x, y), repeats)
        b_custom, b_reference = peak_bytes(custom, (x, y)), peak_bytes(reference, (x, y))
        print(
            f"{f'{n}, {m}, {k}':>16} {1e3 * t_custom:>10.2f} {1e3 * t_reference:>13.2f} "
            f"{t_reference / t_custom:>8.2f}x {b_custom / 1e6:>10.1f} "
            f"{b_reference / 1e6:>13.1f} {b_reference / b_custom:>12.2f}x"
        )
    print("speed-up and memory ratio: reference / custom (above 1 means the custom rule wins)")


if __name__ == "__main__":
    main()
