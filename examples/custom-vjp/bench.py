"""Time and memory of jit(value_and_grad) for the DEQ layer: implicit VJP vs unrolled autodiff.

    python examples/custom-vjp/bench.py [--quick]

For a fair comparison both versions reach the same accuracy: for each problem the script first
counts how many forward iterations the implicit solver needs to meet the tolerance, then gives
the unrolled reference exactly that many. (Giving it a fixed larger count would only make it
look worse.) The harder the problem (W's spectral norm closer to 1), the more iterations.

Memory is XLA's compile-time buffer assignment (argument + output - alias + temp bytes), from
`jax.jit(...).lower(...).compile().memory_analysis()`; it is the same on every run.
"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from deq import cell, deq_layer, init_params
from reference import deq_layer_unrolled, numpy_deq_grads, numpy_deq_solution

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/
from shared.timing import bench_arguments, median_times

TOL = 1e-5  # float32 throughout, as a DEQ would usually be trained


def iterations_needed(params, x, tol):
    """Forward iterations the implicit solver runs: its stopping test, per example, in NumPy
    float32 (the vmapped loop runs until the slowest example is done)."""
    step = jax.jit(jax.vmap(cell, in_axes=(None, 0, 0)))
    z = jnp.zeros((x.shape[0], params.W.shape[0]), x.dtype)
    for i in range(1, 100_000):
        z_next = step(params, x, z)
        gap = np.max(np.abs(np.asarray(z_next - z)), axis=1)
        if np.all(gap <= tol * np.max(np.abs(np.asarray(z_next)), axis=1)):
            return i
        z = z_next
    raise RuntimeError("problem does not converge; lower the contraction")


def loss_fn(layer):
    return lambda params, x: jnp.mean(layer(params, x) ** 2)


def footprint_bytes(compiled):
    stats = compiled.memory_analysis()
    return (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
        + stats.temp_size_in_bytes
    )


def run_case(batch, hidden, features, contraction, repeats, seed=0):
    rng = np.random.default_rng(seed)
    params = init_params(rng, hidden, features, contraction=contraction, dtype=np.float32)
    # Small inputs keep tanh near its linear range, so the rate of convergence is close to
    # `contraction` (init_params makes every singular value of W equal to it) and the
    # contraction sets the iteration count; large inputs saturate tanh and converge fast.
    x = jnp.asarray(0.1 * rng.standard_normal((batch, features)), dtype=np.float32)
    iters = iterations_needed(params, x, TOL)

    implicit = jax.value_and_grad(
        loss_fn(lambda p, x_: deq_layer(p, x_, tol=TOL, max_iter=10 * iters)), argnums=(0, 1)
    )
    unrolled = jax.value_and_grad(
        loss_fn(lambda p, x_: deq_layer_unrolled(p, x_, iters)), argnums=(0, 1)
    )
    # Compile once: the same executable is timed and asked for its memory.
    implicit_jit, unrolled_jit = (
        jax.jit(fn).lower(params, x).compile() for fn in (implicit, unrolled)
    )

    # Both must get the right answer, or the timing comparison means nothing: relative error
    # of each gradient against the float64 NumPy implicit-function-theorem solve.
    z64 = numpy_deq_solution(params, x)
    exact = jax.tree.leaves(numpy_deq_grads(params, x, 2 * z64 / z64.size))
    err_imp, err_unr = (
        max(
            float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))
            for got, want in zip(jax.tree.leaves(fn(params, x)[1]), exact, strict=True)
        )
        for fn in (implicit_jit, unrolled_jit)
    )

    times = median_times({"implicit": implicit_jit, "unrolled": unrolled_jit}, (params, x), repeats)
    t_imp, t_unr = times["implicit"], times["unrolled"]
    m_imp, m_unr = footprint_bytes(implicit_jit), footprint_bytes(unrolled_jit)
    print(
        f"{batch:>5} {hidden:>6} {contraction:>5.2f} {iters:>5} | "
        f"{t_imp * 1e3:>9.3f} {t_unr * 1e3:>9.3f} {t_unr / t_imp:>6.2f}x | "
        f"{m_imp / 1024:>9.1f} {m_unr / 1024:>10.1f} {m_unr / m_imp:>7.1f}x | "
        f"{err_imp:>8.1e} {err_unr:>8.1e}",
        flush=True,
    )


def main():
    args = bench_arguments(__doc__, quick="one size, three problems").parse_args()

    if args.quick:
        sizes, contractions, repeats = [(16, 64, 32)], [0.5, 0.9, 0.97], 5
    else:
        sizes, contractions, repeats = [(16, 64, 32), (64, 256, 64)], [0.5, 0.9, 0.97, 0.99], 20

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, float32, tol={TOL}")
    print("time: median of jit(value_and_grad) calls; memory: compiled footprint in KiB")
    print("ratios: unrolled / implicit; grad err: max error relative to max |gradient|, against")
    print("the float64 NumPy implicit-function-theorem gradients")
    print(
        f"{'batch':>5} {'hidden':>6} {'||W||':>5} {'iters':>5} | "
        f"{'impl ms':>9} {'unrl ms':>9} {'ratio':>7} | "
        f"{'impl KiB':>9} {'unrl KiB':>10} {'ratio':>8} | "
        f"{'impl err':>8} {'unrl err':>8}"
    )
    for batch, hidden, features in sizes:
        for contraction in contractions:
            run_case(batch, hidden, features, contraction, repeats)


if __name__ == "__main__":
    main()
