"""Oracles, written without the primitive.

1. Plain JAX, two formulations of the same product that ordinary autodiff differentiates:
   ``dense_matvec`` (scatter the values into a dense matrix, then ``@``) and
   ``segment_sum_matvec`` (gather and ``jax.ops.segment_sum`` on precomputed row ids: the
   primitive's own computation, as one writes it without a primitive).
2. float64 NumPy, independent of JAX: ``numpy_csr_matvec`` (a loop over rows),
   ``numpy_diffusion_matrix`` (I + tau L(w) built from the edge list, not from CSR), and
   ``numpy_implicit_step`` (``np.linalg.solve``, with the fitting loss's gradient by the adjoint
   method).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from csr import CSR
from diffusion import Graph

__all__ = [
    "dense_matvec",
    "numpy_csr_matvec",
    "numpy_diffusion_matrix",
    "numpy_implicit_step",
    "segment_sum_matvec",
]


def _rows(a: CSR) -> jax.Array:
    """The row of each stored value (a different formula from csr.row_ids: a binary search)."""
    nnz = a.indices.shape[0]
    return jnp.searchsorted(a.indptr, jnp.arange(nnz, dtype=a.indptr.dtype), side="right") - 1


def dense_matvec(a: CSR):
    """v -> A v with A as a dense (n_rows, n_cols) matrix (O(n_rows * n_cols) per product)."""
    dense = jnp.zeros(a.shape, a.data.dtype).at[_rows(a), a.indices].add(a.data)
    return lambda v: dense @ v


def segment_sum_matvec(a: CSR, rows=None):
    """v -> A v as gather + sorted segment sum in plain JAX; v of shape (n_cols,) or (n_cols, k).

    rows: the row of each stored value, if known (e.g. kept beside a COO matrix), else computed.
    """
    rows = _rows(a) if rows is None else rows

    def matvec(v):
        data = a.data.reshape(a.data.shape + (1,) * (v.ndim - 1))
        return jax.ops.segment_sum(
            data * v[a.indices], rows, num_segments=a.shape[0], indices_are_sorted=True
        )

    return matvec


def numpy_csr_matvec(data, indices, indptr, x):
    """float64 A x, row by row; x of shape (n_cols,) or (n_cols, k)."""
    data, x = np.asarray(data, np.float64), np.asarray(x, np.float64)
    indices, indptr = np.asarray(indices), np.asarray(indptr)
    y = np.zeros((len(indptr) - 1, *x.shape[1:]))
    for i in range(len(indptr) - 1):
        for k in range(indptr[i], indptr[i + 1]):
            y[i] += data[k] * x[indices[k]]
    return y


def numpy_diffusion_matrix(graph: Graph, w, tau):
    """float64 dense I + tau (D - W), from the edge list."""
    w = np.asarray(w, np.float64)
    m = np.eye(graph.n)
    for e, (i, j) in enumerate(zip(graph.src, graph.dst, strict=True)):
        m[i, i] += tau * w[e]
        m[j, j] += tau * w[e]
        m[i, j] -= tau * w[e]
        m[j, i] -= tau * w[e]
    return m


def numpy_implicit_step(graph: Graph, w, tau, u_before, u_after):
    """float64 (u_next, loss, d loss / d w, d loss / d u_before) for a batch (signals, n).

    u_next = M^-1 u with M = I + tau L(w) symmetric; loss = 0.5 sum (u_next - u_after)^2.
    Adjoint: lam = M^-1 (u_next - u_after) per signal; d loss / d M = -sum lam u_next^T, and
    w[e] enters M at (i, i), (j, j) with +tau and at (i, j), (j, i) with -tau.
    """
    m = numpy_diffusion_matrix(graph, w, tau)
    u_before = np.asarray(u_before, np.float64)
    u_next = np.linalg.solve(m, u_before.T).T
    residual = u_next - np.asarray(u_after, np.float64)
    lam = np.linalg.solve(m, residual.T).T
    g = -lam.T @ u_next  # d loss / d M, (n, n)
    i, j = graph.src, graph.dst
    grad_w = tau * (g[i, i] + g[j, j] - g[i, j] - g[j, i])
    return u_next, 0.5 * np.sum(residual**2), grad_w, lam
