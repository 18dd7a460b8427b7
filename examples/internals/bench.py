"""Time the CSR primitive against two plain-JAX formulations of the same product.

    python examples/internals/bench.py [--quick]

Three versions of v -> A v, A = I + tau L(w) on an s x s grid graph (float32):
``prim`` (the primitive), ``segsum`` (gather + sorted ``jax.ops.segment_sum`` on precomputed
row ids, differentiated by ordinary autodiff) and ``dense`` (the matrix as a dense array; only
up to 1024 nodes). Each is timed in three programs, all jitted:

- ``matvec x k``: ``vmap`` of the product over k vectors;
- ``explicit grad``: value and gradient w.r.t. (w, u) of 20 explicit steps u <- u - tau L u on
  k signals (reverse mode transposes the product with respect to u: the primitive uses its
  symmetric rule, segsum's autodiff an unsorted scatter-add);
- ``implicit grad``: value and gradient w.r.t. w of the CG fitting loss on k signals (the
  implicit step of diffusion.py; gradients through the values of the matrix).

Each line prints median milliseconds and the ratios segsum / prim and dense / prim (above 1x:
the primitive is faster), after checking that the three versions agree.
"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from diffusion import diffusion_matrix, explicit_steps, fit_loss, grid_graph
from reference import dense_matvec, segment_sum_matvec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/
from shared.timing import bench_arguments, median_seconds

TAU = 0.1  # explicit steps are stable: tau * largest eigenvalue of L <= 0.1 * 2 * 4 * 1.25 < 2


def versions(graph, n):
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr)).astype(np.int32)
    out = {
        "prim": lambda w: diffusion_matrix(graph, w, TAU).__matmul__,
        # Row ids precomputed once, in NumPy (a constant of the program), as one would.
        "segsum": lambda w: segment_sum_matvec(diffusion_matrix(graph, w, TAU), rows),
    }
    if n <= 1024:  # the dense matrix is n^2: 4 MiB here, slow beyond
        out["dense"] = lambda w: dense_matvec(diffusion_matrix(graph, w, TAU))
    return out


def programs(matrix_of, k):
    def matvec(w, u):
        return jax.vmap(matrix_of(w))(u)

    def explicit(w, u):
        return jnp.sum(explicit_steps(matrix_of(w), u.T, 20) ** 2)

    def implicit(w, u):
        return fit_loss(matrix_of, w, u, 0.5 * u, tol=1e-5)

    return {
        f"matvec x {k}": jax.jit(matvec),
        "explicit grad": jax.jit(jax.value_and_grad(explicit, argnums=(0, 1))),
        "implicit grad": jax.jit(jax.value_and_grad(implicit)),
    }


def run(side, k, repeats):
    graph = grid_graph(side)
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.uniform(0.75, 1.25, len(graph.src)), jnp.float32)
    u = jnp.asarray(rng.standard_normal((k, graph.n)), jnp.float32)
    table = {name: programs(matrix_of, k) for name, matrix_of in versions(graph, graph.n).items()}
    for program in table["prim"]:
        results = {name: progs[program](w, u) for name, progs in table.items()}
        want = jax.tree.leaves(results["prim"])
        for name, got in results.items():
            for a, b in zip(jax.tree.leaves(got), want, strict=True):
                err = float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
                if err > 1e-3:
                    raise SystemExit(f"{program}: {name} disagrees with prim (rel err {err:.1e})")
        ms = {
            name: 1e3 * median_seconds(progs[program], (w, u), repeats)
            for name, progs in table.items()
        }
        dense = f"{ms['dense']:>9.3f} {ms['dense'] / ms['prim']:>8.2f}x" if "dense" in ms else ""
        print(
            f"{graph.n:>6} {len(graph.indices):>6} {program:>14} | {ms['prim']:>9.3f} "
            f"{ms['segsum']:>9.3f} {ms['segsum'] / ms['prim']:>8.2f}x {dense}",
            flush=True,
        )


def main():
    args = bench_arguments(__doc__, quick="one small graph, few repeats").parse_args()
    # (grid side, signals, repeats): fewer repeats where one call takes seconds.
    cases = [(32, 8, 5)] if args.quick else [(32, 8, 30), (64, 8, 30), (256, 8, 10), (256, 64, 3)]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, float32, median ms")
    print("ratios: other / prim (above 1x: the primitive is faster)")
    print(
        f"{'nodes':>6} {'nnz':>6} {'program':>14} | {'prim ms':>9} {'segsum ms':>9} "
        f"{'seg/prim':>9} {'dense ms':>9} {'den/prim':>9}"
    )
    for side, k, repeats in cases:
        run(side, k, repeats)


if __name__ == "__main__":
    main()
