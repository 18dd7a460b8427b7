"""A sparse CSR matrix times dense vectors, as a new JAX primitive.

    y[i, ...] = sum over k in indptr[i] .. indptr[i+1]-1 of data[k, ...] * x[indices[k], ...]

``csr_matvec_p`` takes four operands: ``data`` (nnz, *trailing) floats, ``indices`` (nnz,) and
``indptr`` (n_rows + 1,) integers (the usual compressed-sparse-row layout, column indices
sorted or not within a row), and ``x`` (n_cols, *trailing) floats. ``data`` and ``x`` have the
same number of trailing axes, and each trailing axis is either equal or 1 in one of them
(broadcast): ``x`` of shape (n_cols, k) is k vectors at once, a sparse-dense matmul, and
``data`` of shape (nnz, k) is k matrices with one sparsity pattern. One static parameter,
``symmetric``, says the matrix equals its transpose (the caller's promise; see ``_transpose``).

The product is linear in ``x`` and, separately, in ``data``, and the rules say so:

- JVP: the sum of the two products with a tangent in one place (the product rule).
- Transpose in ``x`` (reverse mode through ``A @ x``): ``A^T ct``, a scatter-add over column
  indices; or, for a symmetric matrix, ``A ct``, the primitive again (no scatter).
- Transpose in ``data``: ``x[indices] * ct[rows]``, one gather each.
- Batching: a vmapped axis becomes a trailing axis, so a batch of vectors is one sparse-dense
  matmul whose gather reads contiguous rows of ``x``, not a loop over vectors.
- Lowering: a gather of ``x`` at the column indices and a sorted segment sum over rows
  (``mlir.lower_fun``: plain StableHLO, on every platform, exportable).

Only public registration points are used: ``jax.extend.core.Primitive``,
``jax.core.ShapedArray``, ``jax.interpreters.{mlir, ad, batching}``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

__all__ = ["CSR", "csr_from_dense", "csr_matvec", "csr_matvec_p", "row_ids"]

csr_matvec_p = Primitive("csr_matvec")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CSR:
    """A sparse matrix: the arrays are pytree leaves, the shape and symmetry are static."""

    data: jax.Array  # (nnz, *trailing) values
    indices: jax.Array  # (nnz,) int32 column of each value, rows in order
    indptr: jax.Array  # (n_rows + 1,) int32: row i is data[indptr[i]:indptr[i+1]]
    shape: tuple[int, int] = dataclasses.field(metadata={"static": True})
    symmetric: bool = dataclasses.field(default=False, metadata={"static": True})

    def with_data(self, data):
        """The same sparsity pattern with new values (e.g. traced ones, to differentiate)."""
        return dataclasses.replace(self, data=data)

    def __matmul__(self, x):
        return csr_matvec(self, x)


def csr_matvec(a: CSR, x):
    """a @ x for x of shape (n_cols,) or (n_cols, k). Bad shapes or dtypes raise at trace time."""
    x = jnp.asarray(x)
    if x.ndim == 0 or x.shape[0] != a.shape[1]:
        raise ValueError(f"csr_matvec: x has shape {x.shape}, expected ({a.shape[1]}, ...)")
    # Give data as many trailing axes as x (size 1: broadcast), as the primitive asks.
    data = a.data.reshape(a.data.shape + (1,) * (x.ndim - a.data.ndim))
    return csr_matvec_p.bind(data, a.indices, a.indptr, x, symmetric=a.symmetric)


def csr_from_dense(dense, *, symmetric=False) -> CSR:
    """A CSR matrix holding the nonzeros of a 2-D NumPy array, row by row (validated here, once,
    in NumPy: the primitive cannot check index values, which are only known at run time)."""
    dense = np.asarray(dense)
    if dense.ndim != 2 or not np.issubdtype(dense.dtype, np.floating):
        raise ValueError(
            f"csr_from_dense: needs a 2-D float array, got {dense.dtype} {dense.shape}"
        )
    if symmetric and not np.array_equal(dense, dense.T):
        raise ValueError("csr_from_dense: symmetric=True, but the matrix is not symmetric")
    rows, cols = np.nonzero(dense)  # row-major order: rows sorted, columns sorted within
    indptr = np.searchsorted(rows, np.arange(dense.shape[0] + 1)).astype(np.int32)
    return CSR(
        jnp.asarray(dense[rows, cols]),
        jnp.asarray(cols.astype(np.int32)),
        jnp.asarray(indptr),
        dense.shape,
        symmetric,
    )


# --- The computation, in existing JAX operations ------------------------------------------------
def row_ids(indptr, nnz):
    """The row of each stored value: [0, 0, 1, 2, 2, 2, ...], from the row pointers."""
    n_rows = indptr.shape[0] - 1
    return jnp.repeat(
        jnp.arange(n_rows, dtype=indptr.dtype), jnp.diff(indptr), total_repeat_length=nnz
    )


def _compute(data, indices, indptr, x, *, symmetric):
    del symmetric  # only the transpose uses it
    products = data * x[indices]  # gather: (nnz, *trailing), broadcast over trailing axes
    rows = row_ids(indptr, indices.shape[0])
    # Rows are sorted by construction: XLA can use a sorted segment sum.
    return jax.ops.segment_sum(
        products, rows, num_segments=indptr.shape[0] - 1, indices_are_sorted=True
    )


# --- Abstract evaluation: shapes, dtypes, and the primitive's own errors ------------------------
def _abstract_eval(data, indices, indptr, x, *, symmetric):
    def fail(message):
        raise TypeError(f"csr_matvec: {message}")

    for name, aval in (("indices", indices), ("indptr", indptr)):
        if aval.ndim != 1 or not jnp.issubdtype(aval.dtype, jnp.integer):
            fail(f"{name} must be a 1-D integer array, got {aval.dtype}{list(aval.shape)}")
    if indptr.shape[0] < 1:
        fail("indptr must have n_rows + 1 >= 1 entries")
    if data.ndim < 1 or data.shape[0] != indices.shape[0]:
        fail(f"data has shape {data.shape}, but indices has {indices.shape[0]} entries")
    if data.dtype != x.dtype or not jnp.issubdtype(x.dtype, jnp.floating):
        fail(f"data and x must share one floating dtype, got {data.dtype} and {x.dtype}")
    if x.ndim != data.ndim:
        fail(f"x {x.shape} and data {data.shape} must have the same number of trailing axes")
    trailing = []
    for a, b in zip(data.shape[1:], x.shape[1:], strict=True):
        if a != b and 1 not in (a, b):
            fail(f"trailing axes of data {data.shape} and x {x.shape} do not broadcast")
        trailing.append(max(a, b) if 1 in (a, b) else a)
    n_rows = indptr.shape[0] - 1
    if symmetric and n_rows != x.shape[0]:
        fail(f"symmetric=True needs a square matrix, got {n_rows} rows and {x.shape[0]} columns")
    return jax.core.ShapedArray((n_rows, *trailing), x.dtype)


csr_matvec_p.def_abstract_eval(_abstract_eval)

_compiled = jax.jit(_compute, static_argnames="symmetric")


def _impl(*args, symmetric):
    # Eager calls skip abstract evaluation: check here too.
    _abstract_eval(*(jax.typeof(a) for a in args), symmetric=symmetric)
    return _compiled(*args, symmetric=symmetric)


csr_matvec_p.def_impl(_impl)

# --- Lowering -------------------------------------------------------------------------------------
mlir.register_lowering(csr_matvec_p, mlir.lower_fun(_compute, multiple_results=False))


# --- JVP: the product rule of a bilinear map ------------------------------------------------------
def _jvp(primals, tangents, *, symmetric):
    data, indices, indptr, x = primals
    t_data, _, _, t_x = tangents  # the integer operands' tangents are symbolic zeros
    y = csr_matvec_p.bind(data, indices, indptr, x, symmetric=symmetric)
    terms = []
    if type(t_data) is not ad.Zero:
        terms.append(csr_matvec_p.bind(t_data, indices, indptr, x, symmetric=symmetric))
    if type(t_x) is not ad.Zero:
        terms.append(csr_matvec_p.bind(data, indices, indptr, t_x, symmetric=symmetric))
    if not terms:
        return y, ad.Zero.from_primal_value(y)
    return y, terms[0] if len(terms) == 1 else terms[0] + terms[1]


ad.primitive_jvps[csr_matvec_p] = _jvp


# --- Transpose: for whichever side the linear program is linear in --------------------------------
def _sum_to_shape(v, shape):
    """Sum v over the trailing axes that the operand of this shape broadcast (size 1 there)."""
    axes = tuple(i for i, (a, b) in enumerate(zip(v.shape, shape, strict=True)) if b == 1 != a)
    return jnp.sum(v, axis=axes, keepdims=True) if axes else v


def _transpose(ct, data, indices, indptr, x, *, symmetric):
    # Each JVP term is linear in data or in x, never both: exactly one is an UndefinedPrimal.
    if type(ct) is ad.Zero:
        return [
            ad.Zero(a.aval) if ad.is_undefined_primal(a) else None
            for a in (data, indices, indptr, x)
        ]
    if ad.is_undefined_primal(x):
        if ad.is_undefined_primal(data):
            raise NotImplementedError("csr_matvec is bilinear: transpose one side only")
        n_cols = x.aval.shape[0]
        if symmetric:
            # A^T = A: the primitive itself (a sorted segment sum), and derivatives of every
            # order stay inside it.
            ct_x = csr_matvec_p.bind(data, indices, indptr, ct, symmetric=True)
        else:
            # A^T ct scatters each value's contribution to its column (unsorted).
            rows = row_ids(indptr, indices.shape[0])
            ct_x = jax.ops.segment_sum(data * ct[rows], indices, num_segments=n_cols)
        return [None, None, None, _sum_to_shape(ct_x, x.aval.shape)]
    # data is linear and x known: d y[i] / d data[k] = x[indices[k]] for k in row i.
    rows = row_ids(indptr, indices.shape[0])
    return [_sum_to_shape(x[indices] * ct[rows], data.aval.shape), None, None, None]


ad.primitive_transposes[csr_matvec_p] = _transpose


# --- Batching: a batch of vectors is one sparse-dense matmul ------------------------------------
def _batch(args, dims, *, symmetric):
    data, indices, indptr, x = args
    data_dim, indices_dim, indptr_dim, x_dim = dims
    if indices_dim is not None or indptr_dim is not None:
        raise NotImplementedError(
            "csr_matvec: vmap over the sparsity pattern (indices, indptr) is not supported; "
            "batch the values (data) or the vectors (x), which share one pattern"
        )

    # The batch becomes trailing axis 1 of data and x: x (n_cols, batch, ...) makes the gather
    # x[indices] read whole contiguous rows, the layout of a sparse-dense matmul. The unbatched
    # one of the two gets a size-1 axis there (broadcast, not copied).
    def to_axis_1(v, dim):
        return jnp.expand_dims(v, 1) if dim is None else jnp.moveaxis(v, dim, 1)

    data, x = to_axis_1(data, data_dim), to_axis_1(x, x_dim)
    return csr_matvec_p.bind(data, indices, indptr, x, symmetric=symmetric), 1


batching.primitive_batchers[csr_matvec_p] = _batch
