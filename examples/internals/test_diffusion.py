"""The use case: implicit and explicit diffusion steps on a grid graph, and the gradient of the
fitting loss w.r.t. the edge conductances, against float64 NumPy and the plain-JAX references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from csr import csr_matvec_p
from diffusion import (
    diffusion_matrix,
    explicit_steps,
    fit_loss,
    grid_graph,
    implicit_step,
    primitive_matvec,
)
from reference import dense_matvec, numpy_diffusion_matrix, numpy_implicit_step, segment_sum_matvec

F32, F64 = np.float32, np.float64
TAU = 0.5


def rel_err(got, want):
    want = np.asarray(want, F64)
    return np.max(np.abs(np.asarray(got, F64) - want)) / np.max(np.abs(want))


@pytest.fixture
def problem(rng):
    graph = grid_graph(5)
    w = rng.uniform(0.5, 1.5, len(graph.src))
    u_before, u_after = rng.standard_normal((2, 3, graph.n))
    return graph, w, u_before, u_after


def test_the_csr_matrix_is_the_numpy_one(problem):
    graph, w, _, _ = problem
    a = diffusion_matrix(graph, jnp.asarray(w), TAU)
    dense = jnp.zeros(a.shape).at[np.repeat(np.arange(graph.n), np.diff(graph.indptr)), a.indices]
    np.testing.assert_allclose(
        dense.add(a.data), numpy_diffusion_matrix(graph, w, TAU), rtol=0, atol=1e-15
    )


def test_numpy_oracle_gradient_matches_finite_differences(problem):
    graph, w, u_before, u_after = problem
    _, _, grad_w, _ = numpy_implicit_step(graph, w, TAU, u_before, u_after)
    eps = 1e-6
    for e in (0, 7, len(w) - 1):
        plus, minus = w.copy(), w.copy()
        plus[e] += eps
        minus[e] -= eps
        fd = (
            numpy_implicit_step(graph, plus, TAU, u_before, u_after)[1]
            - numpy_implicit_step(graph, minus, TAU, u_before, u_after)[1]
        ) / (2 * eps)
        assert abs(fd - grad_w[e]) < 1e-7 * max(1.0, abs(grad_w[e]))


MATRICES = {
    "primitive": lambda graph: primitive_matvec(graph, TAU),
    "dense": lambda graph: lambda w: dense_matvec(diffusion_matrix(graph, w, TAU)),
    "segment_sum": lambda graph: lambda w: segment_sum_matvec(diffusion_matrix(graph, w, TAU)),
}


# The primitive in both dtypes; the plain-JAX references (oracles) in float64.
@pytest.mark.parametrize(
    ("version", "dtype"),
    [("primitive", F32), ("primitive", F64), ("dense", F64), ("segment_sum", F64)],
    ids=["primitive-f32", "primitive-f64", "dense-f64", "segment_sum-f64"],
)
def test_fitting_loss_and_gradients_match_numpy(version, dtype, problem):
    graph, w, u_before, u_after = problem
    want_u, want_loss, want_grad_w, want_grad_u = numpy_implicit_step(
        graph, w, TAU, u_before, u_after
    )
    tol = 1e-12 if dtype == F64 else 1e-6
    bound = 1e-10 if dtype == F64 else 1e-4
    matrix_of = MATRICES[version](graph)
    w_, ub, ua = (jnp.asarray(a, dtype) for a in (w, u_before, u_after))

    @jax.jit
    def run(w, ub):
        loss, grads = jax.value_and_grad(
            lambda w, ub: fit_loss(matrix_of, w, ub, ua, tol=tol), argnums=(0, 1)
        )(w, ub)
        return implicit_step(matrix_of(w), ub, tol=tol), loss, grads

    u_next, loss, (grad_w, grad_u) = run(w_, ub)
    assert u_next.dtype == loss.dtype == grad_w.dtype == dtype
    assert rel_err(u_next, want_u) < bound
    assert rel_err(loss, want_loss) < bound
    assert rel_err(grad_w, want_grad_w) < bound
    assert rel_err(grad_u, want_grad_u) < bound


def test_a_batch_of_signals_is_one_sparse_dense_matmul_per_cg_iteration(problem):
    graph, w, u_before, _ = problem
    matvec = primitive_matvec(graph, TAU)(jnp.asarray(w))
    jaxpr = jax.make_jaxpr(lambda u: implicit_step(matvec, u))(u_before)
    shapes = [
        e.invars[3].aval.shape for e in all_equations(jaxpr.jaxpr) if e.primitive is csr_matvec_p
    ]
    # The loop runs the product on all 3 signals at once, x of shape (n, 3). (cg's
    # custom_linear_solve also keeps the one-vector matvec, (n,), as a jaxpr for its own rules.)
    assert (graph.n, 3) in shapes, shapes
    assert set(shapes) <= {(graph.n, 3), (graph.n,)}, shapes


def all_equations(jaxpr):
    """Every equation of a jaxpr, and of the jaxprs inside its equations (loops, jits)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else [param]:
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds a Jaxpr
                if hasattr(inner, "eqns"):
                    yield from all_equations(inner)


def test_explicit_steps_and_their_gradient_match_the_dense_reference(problem):
    graph, w, u_before, _ = problem
    u = u_before.T  # (n, signals)

    def loss(matrix_of):
        return jax.jit(
            jax.value_and_grad(
                lambda w, u: jnp.sum(explicit_steps(matrix_of(w), u, 5) ** 2), argnums=(0, 1)
            )
        )

    ours = loss(MATRICES["primitive"](graph))(w, u)
    want = loss(MATRICES["dense"](graph))(w, u)
    for got, expected in zip(jax.tree.leaves(ours), jax.tree.leaves(want), strict=True):
        assert rel_err(got, expected) < 1e-13
    # ...and the dense reference's values against float64 NumPy.
    m = numpy_diffusion_matrix(graph, w, TAU)
    v = u
    for _ in range(5):
        v = 2 * v - m @ v
    assert rel_err(want[0], np.sum(v**2)) < 1e-13
