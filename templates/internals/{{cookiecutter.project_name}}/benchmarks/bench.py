"""Time the primitive against the plain-JAX reference (dense matrix), forward
and value-and-grad, jitted. Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from {{ cookiecutter.package_name }} import tridiagonal_matvec, tridiagonal_matvec_reference


def value_and_grad(f):
    def loss(*args):
        return jnp.sum(jnp.sin(f(*args)))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))


def median_seconds(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    # (batch, n): the reference's dense matrices take batch * n^2 floats.
    sizes = [(64, 128)] if args.quick else [(256, 256), (64, 1024), (4, 4096)]
    repeats = 3 if args.quick else args.repeats

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; median of {repeats} runs")
    print(
        f"{'batch, n':>12} {'pass':>15} {'primitive ms':>13} {'reference ms':>13} {'speed-up':>9}"
    )
    rng = np.random.default_rng(0)
    for batch, n in sizes:
        operands = [jnp.asarray(rng.standard_normal((batch, n)), jnp.float32) for _ in range(4)]
        for name, wrap in (("forward", jax.jit), ("value_and_grad", value_and_grad)):
            t_prim = median_seconds(wrap(tridiagonal_matvec), operands, repeats)
            t_ref = median_seconds(wrap(tridiagonal_matvec_reference), operands, repeats)
            print(
                f"{f'{batch}, {n}':>12} {name:>15} {1e3 * t_prim:>13.3f} {1e3 * t_ref:>13.3f} "
                f"{t_ref / t_prim:>8.1f}x"
            )
    print("speed-up: reference / primitive (above 1 means the primitive wins)")


if __name__ == "__main__":
    main()
