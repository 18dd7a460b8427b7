{% if cookiecutter.example == "none" -%}
"""TODO: your op, with a custom {{ cookiecutter.rule.upper() }} rule.

The skeleton is the identity, x * 1, with the identity's derivative: replace
the primal and the rule with your own, and reference.py with the same formula
in plain JAX. Keep the shape of the module: checks and dtype promotion in the
public wrapper, outside the rule, where JAX differentiates them.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def {{ cookiecutter.op_name }}(x: ArrayLike) -> jax.Array:
    """TODO: what the op computes, its shapes and dtypes."""
    x = jnp.asarray(x)
    # TODO: your input checks (a clear error here, before JAX traces the rule).
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must be a real floating-point array, got {x.dtype}")
    return _{{ cookiecutter.op_name }}(x)
{% if cookiecutter.rule == "vjp" %}

@jax.custom_vjp
def _{{ cookiecutter.op_name }}(x: jax.Array) -> jax.Array:
    return x * 1  # TODO: your primal


def _fwd(x: jax.Array) -> tuple[jax.Array, None]:
    # TODO: the residuals your backward needs (here none).
    return _{{ cookiecutter.op_name }}(x), None


def _bwd(residuals: None, cotangent: jax.Array) -> tuple[jax.Array]:
    # TODO: your backward: one cotangent per primal input, of its type (shape,
    # dtype; inside shard_map, summed over the axes its primal does not vary on).
    return (cotangent * 1,)


_{{ cookiecutter.op_name }}.defvjp(_fwd, _bwd)
{% else %}

@jax.custom_jvp
def _{{ cookiecutter.op_name }}(x: jax.Array) -> jax.Array:
    return x * 1  # TODO: your primal


@_{{ cookiecutter.op_name }}.defjvp
def _jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (x_dot,) = primals, tangents
    # TODO: your tangent, linear in x_dot (JAX transposes it for reverse mode).
    return _{{ cookiecutter.op_name }}(x), x_dot * 1
{% endif -%}
{% else -%}
"""Pairwise Euclidean distances with a custom {{ cookiecutter.rule.upper() }}.

Why a custom rule: d_ij = sqrt(sum_k (x_ik - y_jk)**2) is not differentiable
where x_i == y_j: every diagonal entry of a self-distance matrix, and any
duplicated point. There plain autodiff computes 0 * (1 / sqrt(0)) = 0 * inf =
NaN, and one NaN entry poisons the whole gradient of any loss that sums over the
matrix (kernels, repulsion energies, contrastive losses). The rule below states
the derivative directly, d(d_ij)/d(x_i) = (x_i - y_j) / d_ij, and takes the
minimum-norm subgradient, 0, where d_ij == 0.

Second derivatives (grad of grad, jax.hessian) are exact away from coincident
points. Where x_i == y_j the true one does not exist (it grows like 1 / d_ij
near the point), and the rule gives 0 there too: exact for self-distances,
whose diagonal |x_i - x_i| is 0 for every x, and the same as the double-where
formulation of the primal.

The rule is also cheaper than autodiff: its derivative is two matrix products
on the (n, m) weights cotangent / d, never the (n, m, features) differences
that autodiff of the formula goes through (faster, and O(n m) memory). The
points are centred first so that those products stay accurate far from the
origin (see _centred). The products cancel for near-duplicates, pairs much
closer than the points' spread, the very pairs this op exists for: those are
recomputed from their differences, one feature at a time, and only when there
are any (see _near_duplicates, and the README for what each form costs).

To adapt: replace _distances and the rule, keep the public wrapper's checks.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def {{ cookiecutter.op_name }}(x: ArrayLike, y: ArrayLike) -> jax.Array:
    """Euclidean distances between the rows of x (n, d) and y (m, d), shape (n, m).

    Differentiable everywhere: where rows coincide the gradient is 0, not NaN,
    and so is the second derivative. Derivatives are accurate however close the
    points: each pair's share is within about 16 epsilons of its exact value
    (float32: 1.9e-6 of it), plus the rounding of the sums. Measured in float32
    against float64 for y = x + delta * noise (64 points, 3 features, random
    cotangent), delta from 1e-2 to 1e-7: gradient errors at most 4.1e-6 on
    gradients up to 19, against 1.9e-6 for autodiff of the plain formula.
    Half-precision inputs (bfloat16, float16) are computed in float32 and the
    result rounded once. Squared differences must stay finite in that compute
    dtype (abs(x - y) below about 1e19 in float32). Use jax.vmap for batches of
    point sets.
    """
    x, y = _checked(x, y)
    # Upcast outside the rule, where JAX differentiates the casts: float16
    # squares overflow beyond |x - y| = 256 (float16's max is 65504), and a
    # backend may add half-precision terms in half precision. One rounding at
    # the end is all the error a half-precision result needs.
    compute = jnp.promote_types(x.dtype, jnp.float32)
    d = _{{ cookiecutter.op_name }}(x.astype(compute), y.astype(compute))
    return d.astype(x.dtype)


def _checked(x: ArrayLike, y: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Validate and promote in plain Python, outside the custom rule.

    The rule's cotangents must match its inputs' dtypes exactly, so mixed
    precision is resolved here, where JAX differentiates the cast for us.
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    for name, a in (("x", x), ("y", y)):
        if a.ndim != 2:
            raise ValueError(
                f"{{ cookiecutter.op_name }}: {name} must be 2-D (points, features), got shape "
                f"{a.shape}; use jax.vmap over extra leading axes"
            )
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(
                f"{{ cookiecutter.op_name }}: {name} must be a real floating-point array, got "
                f"{a.dtype}; cast it, e.g. {name}.astype(jnp.float32)"
            )
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            "{{ cookiecutter.op_name }}: x and y need the same number of features, got "
            f"x.shape={x.shape} and y.shape={y.shape}"
        )
    dtype = jnp.result_type(x, y)
    return x.astype(dtype), y.astype(dtype)


def _distances(x: jax.Array, y: jax.Array) -> jax.Array:
    # Features first, (features, n, m): the sum runs over the leading axis, one
    # vectorised pass over a contiguous (n, m) plane per feature. Summing over
    # the minor axis of (n, m, features), as the reference does, measured 1.4x
    # (64 features) to 6x (3 features) slower on CPU.
    diff = x.T[:, :, None] - y.T[:, None, :]
    return jnp.sqrt(jnp.sum(diff * diff, axis=0))


def _inverse_or_zero(d: jax.Array) -> jax.Array:
    """1 / d, and 0 where d == 0 (the subgradient choice).

    The inner where keeps the division finite, so that differentiating this
    expression again (grad of grad) does not produce NaN either; that also
    needs d's own derivative to be finite, hence the rules compute d with the
    op itself. Testing d == 0 rather than d > 0 lets a NaN distance stay NaN
    instead of silently becoming a zero gradient.
    """
    coincident = d == 0
    return jnp.where(coincident, 0, 1 / jnp.where(coincident, 1, d))


def _centred(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """x and y shifted by their common mean (distances are translation invariant).

    The matrix-product form of the derivative subtracts terms of size |x| |w|
    to get terms of size |x_i - y_j| |w|: for points at 1e4 with a spread of 1,
    float32 would lose 4 of its 7 digits. Centred, the terms are the size of
    the spread. Any centre gives the same result in exact arithmetic, so its
    rounding is harmless and it is held constant (no derivative flows through
    it), and x - centre is exact for points close to it. Only finite points
    count, so that a NaN point spoils its own gradients and not everyone's.
    """
    # x's and y's sums taken apart, not over their concatenation: under
    # explicit sharding, x's points sharded and y's not cannot be joined.
    finite_x, finite_y = jnp.isfinite(x), jnp.isfinite(y)
    total = jnp.sum(jnp.where(finite_x, x, 0), axis=0)
    total += jnp.sum(jnp.where(finite_y, y, 0), axis=0)
    count = jnp.sum(finite_x, axis=0) + jnp.sum(finite_y, axis=0)
    centre = jax.lax.stop_gradient(total / jnp.maximum(count, 1))
    return x - centre, y - centre


def _matmul(a: jax.Array, b: jax.Array, like: jax.Array) -> jax.Array:
    # Full precision: GPUs and TPUs may otherwise multiply float32 in TF32 or
    # bfloat16, which would cost the gradient 3 to 5 digits. Sharded like
    # `like`: under explicit sharding a product contracting a sharded axis has
    # no sharding of its own, and the rule's results must have their primal's
    # type, sharding included.
    return jnp.matmul(
        a, b, precision=jax.lax.Precision.HIGHEST, out_sharding=jax.typeof(like).sharding
    )


# The matrix-product form subtracts terms of size |x_i| |w_ij| (x and y
# centred) to get a pair's term of size d_ij |w_ij|, so its rounding error
# relative to that term is about eps * (|x_i| + |y_j|) / d_ij: at d_ij a
# millionth of the spread, float32's eps (1.2e-7) leaves no correct digit.
# Pairs where that ratio passes 16 are recomputed from their differences,
# which cost eps whatever d_ij; the rest keep the products, with at most 16 eps
# (float32: 1.9e-6) of each pair's term, about what summing a few dozen float32
# terms costs anyway. The bound is in epsilons, so it holds in every dtype.
_MAX_PRODUCT_ERROR_IN_EPS = 16


def _near_duplicates(d: jax.Array, xc: jax.Array, yc: jax.Array) -> jax.Array:
    """The pairs (n, m) whose matrix-product terms would be off by more than
    _MAX_PRODUCT_ERROR_IN_EPS epsilons: (|xc_i| + |yc_j|) / d_ij above it.

    Squared, bounding (|a| + |b|)**2 by 2 (|a|**2 + |b|**2) (no square roots),
    so that every pair left to the products is within the bound.
    Coincident pairs (d == 0) are not among them: their weight is 0 in either
    form, and self-distances, where every diagonal pair coincides, would
    otherwise always take the slow path. A NaN distance is not either, so NaN
    still reaches the products and the gradient.
    """
    norms = jnp.sum(xc * xc, axis=1)[:, None] + jnp.sum(yc * yc, axis=1)[None, :]
    return (d > 0) & ((_MAX_PRODUCT_ERROR_IN_EPS * d) ** 2 < 2 * norms)


def _by_feature(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """The arrays (points, features) transposed to (features, points), for a
    loop over features, with the features axis whole on every device: a loop
    cannot run over an axis that explicit sharding splits (JAX refuses it)."""
    transposed = []
    for a in arrays:
        sharding = jax.typeof(a).sharding
        if len(sharding.spec) == 2 and sharding.spec[1] is not None:
            # The mesh from the type: under jit there may be no context mesh.
            a = jax.sharding.reshard(a, jax.NamedSharding(sharding.mesh, jax.P(sharding.spec[0])))
        transposed.append(a.T)
    return tuple(transposed)


def _resharded_like(a: jax.Array, like: jax.Array) -> jax.Array:
    """a with like's sharding (a no-op unless explicit sharding differs)."""
    sharding = jax.typeof(like).sharding
    if jax.typeof(a).sharding.spec == sharding.spec:
        return a
    resharded: jax.Array = jax.sharding.reshard(a, sharding)
    return resharded
{% if cookiecutter.rule == "vjp" %}

@jax.custom_vjp
def _{{ cookiecutter.op_name }}(x: jax.Array, y: jax.Array) -> jax.Array:
    return _distances(x, y)


Residuals = tuple[jax.Array, jax.Array, jax.Array]


def _fwd(x: jax.Array, y: jax.Array) -> tuple[jax.Array, Residuals]:
    # The op itself, not _distances: differentiating _bwd again (grad of grad)
    # differentiates this d, and through the rule its derivative is 0 where it
    # is 0; through sqrt it would be 0 * inf = NaN.
    d = _{{ cookiecutter.op_name }}(x, y)
    # Residuals are the inputs and the (n, m) distances: _bwd never needs the
    # (n, m, k) differences.
    return d, (x, y, d)


def _bwd(residuals: Residuals, cotangent: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, y, d = residuals
    weight = cotangent * _inverse_or_zero(d)  # (n, m)
    # grad_x_i = sum_j w_ij (x_i - y_j) = x_i * rowsum(w)_i - (w @ y)_i, and
    # grad_y_j = -sum_i w_ij (x_i - y_j) = y_j * colsum(w)_j - (w^T @ x)_j:
    # two matrix products and O(n m) memory, where the differences would
    # take an (n, m, features) tensor.
    xc, yc = _centred(x, y)
    near = _near_duplicates(d, xc, yc)
    far_weight = jnp.where(near, 0, weight)
    grad_x = xc * jnp.sum(far_weight, axis=1)[:, None] - _matmul(far_weight, yc, like=x)
    grad_y = yc * jnp.sum(far_weight, axis=0)[:, None] - _matmul(far_weight.T, xc, like=y)
    # The near-duplicates from their differences, and only when there are any:
    # jit then runs one branch (vmap turns the cond into a select, which runs
    # both and is still right).
    near_x, near_y = jax.lax.cond(
        jnp.any(near),
        _weighted_differences,
        _zeros_of_weighted_differences,
        jnp.where(near, weight, 0),
        x,
        y,
    )
    # One cotangent per primal input, of its type: shape, dtype and sharding.
    return _summed_like(grad_x + near_x, x), _summed_like(grad_y + near_y, y)


def _weighted_differences(
    weight: jax.Array, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """sum_j w_ij (x_i - y_j) and -sum_i w_ij (x_i - y_j), from the differences.

    The raw points, not the centred ones: x_i - y_j of two near points is
    exact in floating point, while centring rounds each to the centre's scale.
    One feature at a time, so the memory is one (n, m) plane, never the
    (n, m, features) tensor (measured 1.3x to 1.8x the products' time on CPU).
    """

    def one_feature(columns: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        x_f, y_f = columns
        terms = weight * (x_f[:, None] - y_f[None, :])
        return jnp.sum(terms, axis=1), -jnp.sum(terms, axis=0)

    grad_x, grad_y = jax.lax.map(one_feature, _by_feature(x, y))
    # Back to the points' own sharding (the loop needed the features whole).
    return _resharded_like(grad_x.T, x), _resharded_like(grad_y.T, y)


def _zeros_of_weighted_differences(
    weight: jax.Array, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Zeros of _weighted_differences' types: both branches of a cond must
    return the same types, and inside jax.shard_map that includes the mesh axes
    along which each result varies (weight's and x's for the first, weight's
    and y's for the second). Only the types are used: XLA drops the
    computation."""
    zeros: tuple[jax.Array, jax.Array] = jax.tree.map(
        jnp.zeros_like, _weighted_differences(weight, x, y)
    )
    return zeros


def _summed_like(cotangent: jax.Array, primal: jax.Array) -> jax.Array:
    """The cotangent summed over the shard_map axes along which it varies and
    its primal does not.

    Inside jax.shard_map with x's points split over a mesh axis and y whole on
    every shard, each shard's grad_y is the part from its own points: y's
    cotangent is their sum. JAX checks that the rule returns it with y's type
    (autodiff inserts this sum itself; a custom rule must say it).
    """
    varying = jax.typeof(cotangent).manual_axis_type.varying
    extra = tuple(varying - jax.typeof(primal).manual_axis_type.varying)
    if not extra:
        return cotangent
    summed: jax.Array = jax.lax.psum(cotangent, extra)
    return summed


_{{ cookiecutter.op_name }}.defvjp(_fwd, _bwd)
{% else %}

@jax.custom_jvp
def _{{ cookiecutter.op_name }}(x: jax.Array, y: jax.Array) -> jax.Array:
    return _distances(x, y)


@_{{ cookiecutter.op_name }}.defjvp
def _jvp(
    primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    x, y = primals
    # Tangents of inputs that are not differentiated arrive as zeros (this rule
    # does not opt into symbolic_zeros), so both can be used unconditionally.
    x_dot, y_dot = tangents
    # The op itself, not sqrt: differentiating this rule again (second
    # derivatives) differentiates d, and through the rule its derivative is 0
    # where it is 0; through sqrt it would be 0 * inf = NaN.
    d = _{{ cookiecutter.op_name }}(x, y)
    # sum_k (x_ik - y_jk)(x_dot_ik - y_dot_jk), expanded into row dot products
    # and two matrix products: O(n m) memory instead of (n, m, k) differences.
    # The tangent must be linear in (x_dot, y_dot): JAX transposes it for
    # reverse mode, and the transpose is the same two products
    # (x * rowsum(w) - w @ y for x), so no separate VJP is needed.
    xc, yc = _centred(x, y)
    inner = (
        jnp.sum(xc * x_dot, axis=1)[:, None]
        - _matmul(x_dot, yc.T, like=d)
        - _matmul(xc, y_dot.T, like=d)
        + jnp.sum(yc * y_dot, axis=1)[None, :]
    )
    # The near-duplicates from their differences, and only when there are any:
    # jit then runs one branch. d goes in rather than zeros made here: see
    # _zeros_typed_like.
    near = _near_duplicates(d, xc, yc)
    exact = jax.lax.cond(
        _any_in_batch(near),
        _inner_of_differences,
        lambda d, *_: _zeros_typed_like(d),
        d,
        x,
        y,
        x_dot,
        y_dot,
    )
    inner = jnp.where(near, exact, inner)
    d_dot = inner * _inverse_or_zero(d)
    return d, d_dot


def _inner_of_differences(
    d: jax.Array, x: jax.Array, y: jax.Array, x_dot: jax.Array, y_dot: jax.Array
) -> jax.Array:
    """sum_k (x_ik - y_jk)(x_dot_ik - y_dot_jk), from the differences, summed
    from zeros of d's type (n, m): the loop's total must keep one type,
    sharding and shard_map variance included, and the cond's other branch
    returns the same zeros.

    The raw points, not the centred ones: x_i - y_j of two near points is
    exact in floating point, while centring rounds each to the centre's scale.
    One feature at a time, accumulated, so the memory is one (n, m) plane,
    never the (n, m, features) tensor. jax.checkpoint recomputes each
    feature's differences when JAX transposes this for reverse mode, instead
    of keeping all of them, (n, m, features), from the forward pass.
    """

    @jax.checkpoint
    def add_feature(total: jax.Array, columns: tuple[jax.Array, ...]) -> tuple[jax.Array, None]:
        x_f, y_f, x_dot_f, y_dot_f = columns
        diff = x_f[:, None] - y_f[None, :]
        return total + diff * (x_dot_f[:, None] - y_dot_f[None, :]), None

    total, _ = jax.lax.scan(add_feature, _zeros_typed_like(d), _by_feature(x, y, x_dot, y_dot))
    return total


def _zeros_typed_like(a: jax.Array) -> jax.Array:
    """Zeros of a's whole type, computed from a: under jax.vmap over an
    explicitly sharded axis, jnp.zeros_like(a) is a constant without a's mesh,
    and a cond or scan that vmap must then split over that axis refuses it
    ("Resource axis: x ... is not found in mesh: ()"). Zero also where a is
    inf or NaN."""
    zeros: jax.Array = jnp.where(jnp.isfinite(a), a, 0) * 0
    return zeros


@jax.custom_batching.custom_vmap
def _any_in_batch(a: jax.Array) -> jax.Array:
    """jnp.any(a), over the whole batch under jax.vmap, for a cond's predicate.

    With a predicate per batch element, vmap turns the cond into a select
    whose operands it wraps in stop_gradient, and inside a JVP rule those are
    tangents, which JAX then cannot transpose: jax.grad of jax.vmap(op) fails
    ("Transpose rule ... for 'stop_gradient' not implemented",
    jax-ml/jax#39219). One predicate for the batch keeps the cond: it runs
    the exact branch for every element when any has near-duplicates, which
    is still right (only their pairs take its result), and skips it when none
    has, as jit does unbatched.
    """
    return jnp.any(a)


@_any_in_batch.def_vmap
def _any_in_batch_vmap(
    axis_size: int, in_batched: list[bool], a: jax.Array
) -> tuple[jax.Array, bool]:
    del axis_size, in_batched
    return _any_in_batch(a), False  # itself again, for nested vmaps
{% endif -%}
{% endif -%}
