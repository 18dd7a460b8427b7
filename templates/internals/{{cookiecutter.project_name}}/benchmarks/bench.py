"""Time the primitive, forward and value-and-grad, jitted, against what it
replaces: the plain-JAX formula a user writes without a primitive (three
shifted products), and the dense reference (the tests' oracle, n^2 memory).
Speed goals live here, never in tests.

A primitive is not climbed for speed: it lowers to the same operations as the
three-term formula, so expect about 1x there. It buys an atomic operation
with rules of your choosing (one jaxpr equation, its own batching, transpose
and errors); the table shows that it costs nothing at run time.

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


def three_term(dl, d, du, x):
    """The banded product as plain JAX, no primitive: what this replaces."""
    pad = [(0, 0)] * (x.ndim - 1)
    below = jnp.pad(x[..., :-1], [*pad, (1, 0)])  # x[i-1], 0 at i = 0
    above = jnp.pad(x[..., 1:], [*pad, (0, 1)])  # x[i+1], 0 at i = n-1
    return dl * below + d * x + du * above


def value_and_grad(f):
    def loss(*args):
        return jnp.sum(jnp.sin(f(*args)))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))


def median_seconds(fns, args, repeats):
    """Median time of each compiled function, calling them in turn, in
    alternating order (each goes first as often as the other).

    Short calls get more repeats (about half a second per function), so that
    a microsecond's noise does not decide the ratio.
    """
    for fn in fns:
        jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    start = time.perf_counter()
    jax.block_until_ready(fns[0](*args))
    repeats = max(repeats, min(2000, int(0.5 / max(time.perf_counter() - start, 1e-6))))
    times = [[] for _ in fns]
    for i in range(repeats):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for k in order:
            start = time.perf_counter()
            jax.block_until_ready(fns[k](*args))
            times[k].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    # (batch, n): the reference's dense matrices take batch * n^2 floats.
    sizes = [(64, 128)] if args.quick else [(256, 256), (64, 1024), (4, 4096)]
    repeats = 3 if args.quick else args.repeats

    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform}; median of at least {repeats} "
        "runs; primitive and 3-term in turn"
    )
    print(
        f"{'batch, n':>12} {'pass':>15} {'primitive ms':>13} {'3-term ms':>10} "
        f"{'vs 3-term':>9} {'dense ms':>10} {'vs dense':>9}"
    )
    rng = np.random.default_rng(0)
    for batch, n in sizes:
        operands = [jnp.asarray(rng.standard_normal((batch, n)), jnp.float32) for _ in range(4)]
        for name, wrap in (("forward", jax.jit), ("value_and_grad", value_and_grad)):
            # The primitive against the formula, in turn; the dense oracle,
            # 100s of times slower, apart (between them it would flush their
            # caches and decide the ratio).
            fns = [wrap(tridiagonal_matvec), wrap(three_term)]
            t_prim, t_three = median_seconds(fns, operands, repeats)
            (t_ref,) = median_seconds([wrap(tridiagonal_matvec_reference)], operands, repeats)
            print(
                f"{f'{batch}, {n}':>12} {name:>15} {1e3 * t_prim:>13.3f} {1e3 * t_three:>10.3f} "
                f"{t_three / t_prim:>8.2f}x {1e3 * t_ref:>10.3f} {t_ref / t_prim:>8.1f}x"
            )
    print("vs X: X's time / the primitive's (above 1 means the primitive wins)")


if __name__ == "__main__":
    main()
