"""Time value-and-grad of the custom rule against autodiff of the reference,
and compare the compiled programs' memory. Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs

Both sides are timed in the same run, call by call in turn (so a busy machine
slows both alike), after a warm-up; the figure is the median.
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


def median_seconds(fns, args, repeats):
    """Median time of each compiled function, calling them in turn.

    Short calls get more repeats (about half a second per function), so that a
    millisecond's noise does not decide the ratio.
    """
    for fn in fns:
        jax.block_until_ready(fn(*args))  # warm-up: first run after compiling
    start = time.perf_counter()
    jax.block_until_ready(fns[0](*args))
    repeats = max(repeats, min(200, int(0.5 / max(time.perf_counter() - start, 1e-6))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, fn_times in zip(fns, times, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            fn_times.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def peak_bytes(compiled):
    """Arguments + outputs + temporaries of the compiled program (XLA's estimate)."""
    stats = compiled.memory_analysis()
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
    parser.add_argument(
        "--max-reference-gb",
        type=float,
        default=4.0,
        help="compile but do not run the reference when it needs more than this",
    )
    args = parser.parse_args()
    sizes = (
        [(256, 256, 16)]
        if args.quick
        # The last size's (n, m, features) tensor alone is 4.3 GB in float32.
        else [(512, 512, 16), (1024, 1024, 64), (2048, 256, 3), (4096, 4096, 16), (4096, 4096, 64)]
    )
    repeats = 3 if args.quick else args.repeats

    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform}; median of at least {repeats} "
        "runs, the two sides in turn"
    )
    print(
        f"{'n, m, features':>16} {'custom ms':>10} {'reference ms':>13} {'speed-up':>9} "
        f"{'custom MB':>10} {'reference MB':>13} {'memory ratio':>13}"
    )
    rng = np.random.default_rng(0)
    for n, m, k in sizes:
        x = jnp.asarray(rng.standard_normal((n, k)), jnp.float32)
        y = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
        custom = value_and_grad(pairwise_distances).lower(x, y).compile()
        reference = value_and_grad(pairwise_distances_reference).lower(x, y).compile()
        b_custom, b_reference = peak_bytes(custom), peak_bytes(reference)
        if b_reference <= args.max_reference_gb * 1e9:
            t_custom, t_reference = median_seconds([custom, reference], (x, y), repeats)
            timing = f"{1e3 * t_reference:>13.2f} {t_reference / t_custom:>8.2f}x"
        else:
            (t_custom,) = median_seconds([custom], (x, y), repeats)
            timing = f"{'not run':>13} {'':>9}"
        print(
            f"{f'{n}, {m}, {k}':>16} {1e3 * t_custom:>10.2f} {timing} {b_custom / 1e6:>10.1f} "
            f"{b_reference / 1e6:>13.1f} {b_reference / b_custom:>12.2f}x"
        )
    print("speed-up and memory ratio: reference / custom (above 1 means the custom rule wins)")
    print(f"reference 'not run': its compiled program needs more than {args.max_reference_gb} GB")


if __name__ == "__main__":
    main()
