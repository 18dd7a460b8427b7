"""The use case: diffusion on a graph with learnable edge conductances.

A signal u on the nodes of a graph diffuses along its edges, edge e = (i, j) with conductance
w[e] > 0. The graph Laplacian is L(w) = D(w) - W(w); one implicit (backward Euler) step of
length tau solves

    (I + tau L(w)) u_next = u,

a sparse symmetric positive definite system, here with conjugate gradients
(``jax.scipy.sparse.linalg.cg``), which only needs a matrix-vector product: ``csr_matvec``.
Fitting w to observed (before, after) snapshots needs the gradient of the solution with respect
to the matrix's values: ``cg`` differentiates implicitly (one more CG solve), through the
primitive's JVP and its transpose with respect to ``data``. A batch of signals is ``vmap`` of
the solve, whose matrix-vector products the primitive's batching rule turns into one
sparse-dense matmul each. ``explicit_steps`` (u <- u - tau L u, repeated) is the explicit
scheme, whose reverse mode uses the transpose with respect to x.

The graph: an s x s grid, each node joined to its right and lower neighbour.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from csr import CSR

__all__ = [
    "Graph",
    "diffusion_matrix",
    "explicit_steps",
    "fit_loss",
    "grid_graph",
    "implicit_step",
    "primitive_matvec",
]


@dataclasses.dataclass(frozen=True)
class Graph:
    """An undirected graph and the sparsity pattern of I + tau L on it (NumPy, static)."""

    n: int  # nodes
    src: np.ndarray  # (edges,) one end of each edge
    dst: np.ndarray  # (edges,) the other end
    order: np.ndarray  # (n + 2 * edges,) permutation: [diagonal, (src, dst), (dst, src)] -> CSR
    indices: np.ndarray  # (n + 2 * edges,) int32 CSR column indices
    indptr: np.ndarray  # (n + 1,) int32 CSR row pointers


def grid_graph(side: int) -> Graph:
    if side < 2:
        raise ValueError(f"grid_graph: side must be at least 2, got {side}")
    node = np.arange(side * side).reshape(side, side)
    src = np.concatenate([node[:, :-1].ravel(), node[:-1, :].ravel()])
    dst = np.concatenate([node[:, 1:].ravel(), node[1:, :].ravel()])
    n = side * side
    # Every stored entry, unsorted: the diagonal, then each edge in both directions.
    rows = np.concatenate([np.arange(n), src, dst])
    cols = np.concatenate([np.arange(n), dst, src])
    order = np.lexsort((cols, rows))  # by row, then column: CSR order
    indptr = np.searchsorted(rows[order], np.arange(n + 1)).astype(np.int32)
    return Graph(n, src, dst, order, cols[order].astype(np.int32), indptr)


def diffusion_matrix(graph: Graph, w, tau) -> CSR:
    """I + tau L(w) as a symmetric CSR matrix; differentiable in w and tau."""
    w = jnp.asarray(w)
    degree = jnp.zeros(graph.n, w.dtype).at[graph.src].add(w).at[graph.dst].add(w)
    values = jnp.concatenate([1 + tau * degree, -tau * w, -tau * w])
    return CSR(
        values[graph.order],
        jnp.asarray(graph.indices),
        jnp.asarray(graph.indptr),
        (graph.n, graph.n),
        symmetric=True,
    )


def implicit_step(matvec, u, *, tol=1e-6, maxiter=1000):
    """Solve (I + tau L) u_next = u by CG, for u of shape (n,) or a batch (signals, n).

    ``matvec`` is any v -> (I + tau L) v on one vector; a batch is vmapped, so each signal's
    CG stops on its own residual (a batched while_loop runs until the slowest is done).
    """

    def solve(b):
        return jax.scipy.sparse.linalg.cg(matvec, b, tol=tol, maxiter=maxiter)[0]

    return solve(u) if u.ndim == 1 else jax.vmap(solve)(u)


def explicit_steps(matvec, u, steps):
    """u <- 2u - (I + tau L) u = u - tau L u, `steps` times: the explicit scheme, for u of shape
    (n,) or (n, signals). Stable while tau * (largest eigenvalue of L) < 2, which holds when
    tau * (largest weighted degree) < 1."""
    return jax.lax.fori_loop(0, steps, lambda _, v: 2 * v - matvec(v), u)


def fit_loss(matrix_of, w, u_before, u_after, *, tol=1e-6):
    """0.5 * sum of squared differences between the predicted and observed next states."""
    matvec = matrix_of(w)
    return 0.5 * jnp.sum((implicit_step(matvec, u_before, tol=tol) - u_after) ** 2)


def primitive_matvec(graph: Graph, tau):
    """w -> (v -> (I + tau L(w)) v) through the primitive."""
    return lambda w: diffusion_matrix(graph, w, tau).__matmul__
