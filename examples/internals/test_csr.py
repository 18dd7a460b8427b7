"""The primitive, rule by rule, against the plain-JAX references and float64 NumPy."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from csr import CSR, csr_from_dense, csr_matvec, csr_matvec_p
from jax.test_util import check_grads
from reference import dense_matvec, numpy_csr_matvec, segment_sum_matvec
from shared.devices import assert_the_default_device_is_the_cpu

F32, F64 = np.float32, np.float64
TOL = {F32: 2e-6, F64: 1e-13}  # max error relative to max |want|


def assert_close(got, want, dtype=F64):
    want = np.asarray(want, F64)
    assert np.shape(got) == want.shape
    err = np.max(np.abs(np.asarray(got, F64) - want)) / max(np.max(np.abs(want)), 1e-300)
    assert err <= TOL[dtype], err


def random_dense(rng, shape, dtype=F64, density=0.3, symmetric=False):
    d = rng.standard_normal(shape) * (rng.random(shape) < density)
    d[0] = 0.0  # an empty row
    if symmetric:
        d = d + d.T
    return d.astype(dtype)


def shuffled_within_rows(a: CSR, rng) -> CSR:
    """The same matrix with each row's entries in random column order (CSR allows it)."""
    indptr = np.asarray(a.indptr)
    perm = np.concatenate(
        [s + rng.permutation(e - s) for s, e in itertools.pairwise(indptr)]
    ).astype(int)
    return CSR(a.data[perm], a.indices[perm], a.indptr, a.shape, a.symmetric)


def test_numpy_oracle_matches_dense_numpy(rng):
    d = random_dense(rng, (7, 5))
    a, x = csr_from_dense(d), rng.standard_normal((5, 3))
    np.testing.assert_allclose(numpy_csr_matvec(a.data, a.indices, a.indptr, x), d @ x, atol=1e-14)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("x_shape", [(5,), (5, 3)], ids=["vector", "matrix"])
def test_values_match_numpy_and_the_plain_jax_references(dtype, x_shape, rng):
    a = shuffled_within_rows(csr_from_dense(random_dense(rng, (7, 5), dtype)), rng)
    x = rng.standard_normal(x_shape).astype(dtype)
    want = numpy_csr_matvec(a.data, a.indices, a.indptr, x)
    for got in (a @ x, jax.jit(csr_matvec)(a, x), dense_matvec(a)(x), segment_sum_matvec(a)(x)):
        assert got.dtype == dtype
        assert_close(got, want, dtype)


def test_an_all_zero_matrix_has_no_stored_values(rng):
    a = csr_from_dense(np.zeros((3, 4)))
    assert a.data.shape == (0,)
    np.testing.assert_array_equal(a @ rng.standard_normal(4), np.zeros(3))


def test_the_product_is_one_equation_in_the_jaxpr(rng):
    a = csr_from_dense(random_dense(rng, (6, 6)))
    jaxpr = jax.make_jaxpr(csr_matvec)(a, np.ones(6)).jaxpr
    assert [str(e.primitive) for e in jaxpr.eqns] == ["csr_matvec"]


def calls(fn, *args):
    """The x operand shape of each csr_matvec equation in fn's jaxpr (top level)."""
    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    return [e.invars[3].aval.shape for e in jaxpr.eqns if e.primitive is csr_matvec_p]


@pytest.mark.parametrize("in_axes", [0, 1, -1])
def test_vmap_over_vectors_is_one_sparse_dense_matmul(in_axes, rng):
    d = random_dense(rng, (7, 5))
    a = csr_from_dense(d)
    xs = rng.standard_normal((4, 5) if in_axes == 0 else (5, 4))
    got = jax.vmap(a.__matmul__, in_axes=in_axes)(xs)
    cols = xs if in_axes != 0 else xs.T
    assert_close(got, (d @ cols).T)
    assert calls(jax.vmap(a.__matmul__, in_axes=in_axes), xs) == [(5, 4)]


def test_vmap_over_values_and_vectors_and_nested(rng):
    d = random_dense(rng, (6, 5))
    a = csr_from_dense(d)
    datas = a.data[None] * rng.standard_normal((3, 1))  # 3 matrices, one pattern
    xs = rng.standard_normal((2, 5))

    def product(data, x):
        return a.with_data(data) @ x

    want = np.einsum("b,ij,cj->bci", np.asarray(datas[:, 0] / a.data[0]), d, xs)
    nested = jax.vmap(jax.vmap(product, in_axes=(None, 0)), in_axes=(0, None))
    assert_close(nested(datas, xs), want)
    both = jax.vmap(product)(datas[:2], xs)
    assert_close(both, want[[0, 1], [0, 1]])
    assert_close(jax.vmap(product, in_axes=(0, None))(datas, xs[0]), want[:, 0])


def test_vmap_over_the_sparsity_pattern_is_refused(rng):
    a = csr_from_dense(random_dense(rng, (4, 4)))
    indices = jnp.stack([a.indices, a.indices])
    with pytest.raises(NotImplementedError, match="sparsity pattern"):
        jax.vmap(lambda i: csr_matvec_p.bind(a.data, i, a.indptr, jnp.ones(4), symmetric=False))(
            indices
        )


@pytest.mark.parametrize("symmetric", [False, True])
def test_jvp_grad_and_transposes_match_the_dense_reference(symmetric, rng):
    d = random_dense(rng, (6, 6), symmetric=symmetric)
    if not symmetric:
        d = random_dense(rng, (6, 8))
    a = csr_from_dense(d, symmetric=symmetric)
    x, tx = rng.standard_normal((2, d.shape[1]))
    t_data = rng.standard_normal(a.data.shape)

    def ours(data, x):
        return jnp.sin(a.with_data(data) @ x)

    def ref(data, x):
        return jnp.sin(dense_matvec(a.with_data(data))(x))

    for got, want in zip(
        jax.jvp(ours, (a.data, x), (t_data, tx)),
        jax.jvp(ref, (a.data, x), (t_data, tx)),
        strict=True,
    ):
        assert_close(got, want)
    grads = jax.grad(lambda *p: jnp.sum(ours(*p) ** 2), argnums=(0, 1))(a.data, x)
    want = jax.grad(lambda *p: jnp.sum(ref(*p) ** 2), argnums=(0, 1))(a.data, x)
    for got, expected in zip(grads, want, strict=True):
        assert_close(got, expected)
    # The transposes themselves, against float64 NumPy: A^T ct and x[indices] * ct[rows].
    ct = rng.standard_normal(d.shape[0])
    (ct_x,) = jax.linear_transpose(a.__matmul__, x)(ct)
    assert_close(ct_x, d.T @ ct)
    (ct_data,) = jax.linear_transpose(lambda data: a.with_data(data) @ x, a.data)(ct)
    rows, cols = np.nonzero(d)
    assert_close(ct_data, ct[rows] * x[cols])
    _, lin = jax.linearize(lambda data: a.with_data(data) @ x, a.data)
    assert_close(lin(t_data), numpy_csr_matvec(t_data, a.indices, a.indptr, x))


def test_the_symmetric_transpose_is_the_primitive_again_not_a_scatter(rng):
    d = random_dense(rng, (6, 6), symmetric=True)
    x = rng.standard_normal(6)
    for symmetric, scatters in ((True, False), (False, True)):
        a = csr_from_dense(d, symmetric=symmetric)
        jaxpr = str(jax.make_jaxpr(jax.grad(lambda x, a=a: jnp.sum(jnp.sin(a @ x))))(x))
        assert jaxpr.count("csr_matvec[") == (2 if symmetric else 1)
        assert ("scatter-add" in jaxpr) == scatters


@pytest.mark.parametrize("symmetric", [False, True])
def test_check_grads_to_second_order(symmetric, rng):
    d = random_dense(rng, (5, 5), symmetric=True)
    a = csr_from_dense(d, symmetric=symmetric)
    x = rng.standard_normal((5, 2))
    check_grads(
        lambda data, x: jnp.sin(a.with_data(data) @ x),
        (a.data, x),
        order=2,
        modes=["fwd", "rev"],
    )


def test_export_round_trip(rng):
    a = csr_from_dense(random_dense(rng, (6, 5)))
    x = rng.standard_normal((5, 2))

    def product(data, indices, indptr, x):
        return csr_matvec(CSR(data, indices, indptr, a.shape), x)

    operands = (a.data, a.indices, a.indptr, x)
    # For the CPU, where conftest.py runs the call: export's default platform is the default
    # backend's (a TPU host's TPU), and an artifact runs only on a platform it was exported for.
    exported = jax.export.export(jax.jit(product), platforms=("cpu",))(*operands)
    assert "custom_call" not in exported.mlir_module()  # plain StableHLO, no foreign call
    restored = jax.export.deserialize(exported.serialize())
    assert_close(restored.call(*operands), numpy_csr_matvec(*operands))


def bad_operands(rng):
    a = csr_from_dense(random_dense(rng, (4, 4)))
    x = np.ones(4)
    yield "dtype", (a.data.astype(F32), a.indices, a.indptr, x), "share one floating dtype"
    yield "int data", (a.indices, a.indices, a.indptr, x.astype(int)), "floating dtype"
    yield "float indices", (a.data, a.data, a.indptr, x), "indices must be a 1-D integer"
    yield "2-D indptr", (a.data, a.indices, a.indptr[None], x), "indptr must be a 1-D integer"
    yield "nnz", (a.data[:-1], a.indices, a.indptr, x), "indices has"
    yield "rank", (a.data, a.indices, a.indptr, np.ones((4, 2))), "same number of trailing"
    yield (
        "broadcast",
        (a.data.reshape(-1, 1) * np.ones(3), a.indices, a.indptr, np.ones((4, 2))),
        ("do not broadcast"),
    )


def bind(*operands):
    return csr_matvec_p.bind(*operands, symmetric=False)


def test_bad_operands_get_the_primitives_own_error_at_trace_time(rng):
    for _, operands, match in bad_operands(rng):
        with pytest.raises(TypeError, match=match):
            jax.jit(bind).trace(*operands)  # tracing only: nothing is compiled or run
        with pytest.raises(TypeError, match=match):
            bind(*operands)  # eager


def test_symmetric_needs_a_square_matrix_and_x_its_column_count(rng):
    a = csr_from_dense(random_dense(rng, (4, 3)))
    with pytest.raises(TypeError, match="square"):
        csr_matvec_p.bind(a.data, a.indices, a.indptr, np.ones(3), symmetric=True)
    with pytest.raises(ValueError, match=r"expected \(3, ...\)"):
        jax.jit(csr_matvec).trace(a, np.ones(4))


def test_csr_from_dense_validates(rng):
    with pytest.raises(ValueError, match="2-D float"):
        csr_from_dense(np.ones(3))
    with pytest.raises(ValueError, match="not symmetric"):
        csr_from_dense(np.triu(np.ones((3, 3))), symmetric=True)


def test_pin_jax_experimental_sparse_csr_matvec_has_no_batching_rule(rng):
    """Why this example writes its own primitive: JAX's own CSR product (experimental) has JVP
    and transpose rules but no batching rule, so vmap over vectors (a batch of CG solves) fails.
    If this test fails, JAX has added one: compare it with this primitive before keeping yours."""
    from jax.experimental import sparse

    d = random_dense(rng, (4, 4)).astype(F32)
    theirs = sparse.CSR.fromdense(d)
    with pytest.raises(NotImplementedError, match="Batching rule for 'csr_matvec'"):
        jax.vmap(lambda v: sparse.csr_matvec(theirs, v))(np.ones((3, 4), F32))
    ours = csr_from_dense(d)
    assert_close(jax.vmap(ours.__matmul__)(np.ones((3, 4), F32)), (d @ np.ones((4, 3))).T, F32)


def test_the_tests_run_on_the_cpu_device_whatever_the_host():
    assert_the_default_device_is_the_cpu()  # as conftest.py sets it
