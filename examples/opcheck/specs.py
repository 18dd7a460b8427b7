"""Conformance declarations for ops nobody in this kit wrote: two of jax.nn's
activations, optax's projection onto the simplex, and the matmul kernel that
ships with Pallas. Each declares its signature for the kit's conformance
matrix (jax_ladder.opcheck.conformance), a plain-JAX reference, an
independent float64 NumPy oracle, its tolerances in ulps (measured: run.py
prints, for each op, the cell that came closest to its tolerance) and what
it refuses.

Import this module only after JAX's settings (8 CPU devices, float64) are
made: run.py and conftest.py make them first.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu.matmul import matmul as pallas_matmul

from jax_ladder.opcheck.compare import Ulps
from jax_ladder.opcheck.conformance import Arg, Collectives, OpSpec, Refuse

try:  # optax is optional: pip install optax (the kit's `test` extra has it)
    from optax.projections import projection_simplex
except ImportError:
    projection_simplex = None


# --- jax.nn.softmax: a custom_jvp (jax._src.ops.special._softmax) ---------------
def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def softmax_reference(x):
    """Written out in plain JAX, autodiff through it (no custom JVP)."""
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def softmax_oracle(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


SOFTMAX = OpSpec(
    name="jax.nn.softmax",
    op=softmax,
    reference=softmax_reference,
    oracle=softmax_oracle,
    signature="x[b,n] -> [b,n]",  # args=(Arg("x", ("b", "n")),), outputs=(("b", "n"),)
    sizes={"b": 8, "n": 16},
    # exp(x - max): the rounding of x - max (half an ulp of it) becomes a
    # relative error of |x - max| / 2 ulps in the exponential, up to 3 for
    # standard normal rows of 16; then exp (1-2 ulps), a sum of positive terms,
    # a division. Measured: see the README.
    tolerance=Ulps(8),
    # y * (dy - sum(y * dy)): the sum's terms cancel, so its rounding counts
    # at the size of the terms (at_scale).
    gradient_tolerance=Ulps(4, 8),
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
)


# --- jax.nn.gelu: no custom JVP in JAX 0.10-0.12 (plain jnp code: its gradient is
# autodiff of the formula), exact (erfc) and tanh-approximate ------------------------
def gelu_exact(x):
    return jax.nn.gelu(x, approximate=False)


def gelu_tanh(x):
    return jax.nn.gelu(x, approximate=True)


def gelu_exact_reference(x):
    return x * jax.scipy.stats.norm.cdf(x)


def gelu_tanh_reference(x):
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1 + jnp.tanh(inner))


_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def gelu_exact_oracle(x):
    return 0.5 * x * _erfc(-x / math.sqrt(2))


def gelu_tanh_oracle(x):
    with np.errstate(over="ignore"):  # x**3 of the huge case: tanh(+-inf) is +-1
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu(name, op, reference, oracle, tolerance, gradient_tolerance):
    return OpSpec(
        name=name,
        op=op,
        reference=reference,
        oracle=oracle,
        signature="x[n] -> [n]",
        sizes={"n": 16},
        tolerance=tolerance,
        gradient_tolerance=gradient_tolerance,
        batch_axes=("n",),
        shard_map_axes=("n",),
        symbolic_axis="n",
    )


GELU_EXACT = _gelu(
    "jax.nn.gelu (approximate=False)",
    gelu_exact,
    gelu_exact_reference,
    gelu_exact_oracle,
    # erfc (XLA's is a polynomial approximation, a few ulps, and differs
    # between its scalar and vectorized loops) and two products: measured 5.5
    # ulps for x > -2. Below, the argument -x / sqrt(2), rounded to float32,
    # meets erfc's steep tail, which multiplies its relative error by about
    # 2a² (a the argument): 12 ulps at x = -3.5, 47 ulps for x in [-6, -4),
    # measured against scipy's erfc on a sweep of float32 inputs (lax.erfc
    # itself is within 1.3 ulps there). No bug: float32 cannot carry the
    # argument closer. Those outputs are tiny beside the outputs' scale,
    # where they are held to 4 ulps. The derivative x * pdf(x) + cdf(x),
    # whose two terms cancel for negative x (the gradient is zero near
    # x = -0.75), at the gradients' scale.
    Ulps(8, 4),
    Ulps(4, 4),
)

GELU_TANH = _gelu(
    "jax.nn.gelu (approximate=True)",
    gelu_tanh,
    gelu_tanh_reference,
    gelu_tanh_oracle,
    # tanh (XLA's CPU tanh is a rational approximation: a few ulps) and
    # 1 + tanh, which cancels for negative x: 0.5 * x * (1 + tanh) loses the
    # bits 1 + tanh cancels, counted at the outputs' scale (the worst cell
    # came to 17% of this tolerance).
    Ulps(4, 8),
    Ulps(4, 8),
)


# --- optax.projections.projection_simplex: a custom_jvp over a sort --------------------
def simplex(x):
    return projection_simplex(x)


def simplex_reference(x):
    """The threshold from the largest (cumsum_k - 1) / k of the values sorted in
    decreasing order (an identity of the projection), not optax's count of the
    support; autodiff through the sort and the gather (no custom JVP). The 1/k
    is added apart from x - cumsum_k / k, which cancels: for huge x, x - tau
    would lose the 1 altogether."""
    u = -jnp.sort(-x)
    k = jnp.arange(1, x.shape[0] + 1, dtype=x.dtype)
    cumsum = jnp.cumsum(u)
    best = jnp.argmax((cumsum - 1) / k)
    return jnp.maximum(1 / k[best] + (x - cumsum[best] / k[best]), 0)


def simplex_oracle(x):
    """Bisection on the threshold tau, sum(max(x - tau, 0)) = 1, for a
    superset of the support (the values above its lower bound); then
    Michelot's algorithm on it: drop the values that the support's own
    threshold leaves at or below zero, until none is dropped."""
    lo, hi = x.min() - 1, x.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(x - mid, 0).sum() > 1 else (lo, mid)
    support = x > lo
    while True:
        k = support.sum()
        p = 1 / k + (x - x[support].sum() / k)
        kept = support & (p > 0)
        if (kept == support).all():
            return np.where(support, p, 0.0)
        support = kept


_SORT_SHARDED = Refuse(
    # jax._src.core.ShardingTypeError, which JAX does not export
    Exception,
    "Arguments to sort must be unsharded over the sorting dimension",
    "the sort needs the whole vector on each device: reshard it to P() first",
)


def _simplex(dtype, tolerance, gradient_tolerance, **more):
    return OpSpec(
        name=f"optax.projections.projection_simplex ({dtype})",
        op=simplex,
        reference=simplex_reference,
        oracle=simplex_oracle,
        signature="x[n] -> [n]",
        sizes={"n": 16},
        dtype=dtype,
        tolerance=tolerance,
        gradient_tolerance=gradient_tolerance,
        symbolic_axis="n",
        refuse={
            "jit-explicit-n": _SORT_SHARDED,
            "jit-explicit-set-mesh-n": _SORT_SHARDED,
            "grad-grad-explicit-n": _SORT_SHARDED,
            "grad-grad-explicit-vmap-n": _SORT_SHARDED,
        },
        **more,
    )


# p = 1/k + (x - cumsum_k / k): the cumulative sum of up to 16 sorted values
# rounds at the size of its terms (the inputs' size, a few units), not of the
# small p it leaves; so does the JVP, supp * dx - mean(dx over the support).
# Counted at the outputs' scale (at_scale).
SIMPLEX = _simplex("float32", Ulps(4, 32), Ulps(4, 32))
# What a user with jax_enable_x64 on gets for float64 inputs (float32 ones
# come back float64: see the README).
SIMPLEX_64 = _simplex(
    "float64",
    Ulps(4, 8),
    Ulps(4, 8),
    extra_collectives={
        "jit-auto-n": Collectives(
            "the custom JVP reduces the sharded vector twice (the support's size, "
            "count_nonzero, and the tangent's sum over it, a dot); the reference's "
            "autodiff once; both gather the vector for the sort",
            gradient={"all-gather": 1, "all-reduce": 2},
        )
    },
)


# --- jax.experimental.pallas.ops.tpu.matmul.matmul: a Pallas TPU kernel ---------------
# Blocks of 8 rows by 128 columns, 128 deep in k: the smallest the TPU's
# tiling takes for float32. The kernel's grid is x.shape[0] // 8, y.shape[1] //
# 128 and x.shape[1] // 128, floor divisions: rows, columns or a depth past
# the last whole block are never computed (MATMUL_RAGGED below).
BLOCK = {"block_shape": (8, 128), "block_k": 128}


# Asked at import, which starts JAX: run.py and conftest.py configure it first.
ON_A_TPU_HOST = jax.default_backend() == "tpu"


def matmul(x, y):
    """The kernel compiled for the TPU on a TPU host; elsewhere the TPU
    interpreter (force_tpu_interpret_mode), which runs it on the CPU."""
    if ON_A_TPU_HOST:
        return pallas_matmul(x, y, **BLOCK)
    with pltpu.force_tpu_interpret_mode():
        return pallas_matmul(x, y, **BLOCK)


def matmul_reference(x, y):
    return jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST)


def matmul_oracle(x, y):
    return x @ y


# What the kernel, as Pallas ships it, refuses (first match wins: exact names,
# then these globs in order).
_SHARD_MAP = Refuse(
    ValueError,
    "manual_axis_type",
    "not inside shard_map with check_vma=True: the kernel's out_shape declares no "
    "varying mesh axes (vma); call it with check_vma=False, or give out_shape its vma",
)
_EXPLICIT = Refuse(
    Exception,  # ValueError, or jax._src.core.ShardingTypeError (not exported)
    "pallas_call requires all mesh axes to be Manual|Contracting dimensions are sharded",
    "not under an Explicit mesh: pallas_call wants Manual axes (call it inside shard_map)",
)
_INTERPRETER_EXPORT = Refuse(
    NotImplementedError,
    "serialization of host_callbacks is not yet implemented",
    "the TPU interpreter calls back into Python, which export cannot serialize; a TPU "
    "host exports the compiled kernel",
)
_SYMBOLIC = Refuse(
    Exception,  # jax.errors.ConcretizationTypeError
    "Abstract tracer value encountered where concrete value is expected",
    "no symbolic shapes: the grid is computed from the shapes in Python",
)
# pallas_call's JVP rule does not count the kernel's scratch buffer (the VMEM
# accumulator) among the kernel's operands, and fails on an internal assertion
# with no message (pytest matches the message and its notes: JAX's note on
# the traceback follows). The cells that compare values first (scan,
# jit-auto, the sizes that fit the blocks) compare them before they
# differentiate; the hard ones batch two draws first, and meet defect 4.
_NO_AUTODIFF = Refuse(
    AssertionError,
    r"\A(check_grads\(.*: )?(\Z|\n)",  # check_grads' cells say what they checked
    "no autodiff: pallas_call's JVP fails on the kernel's scratch buffer (a bare "
    "AssertionError: a JAX defect, see the README); wrap the kernel in a custom_vjp",
)
# On a TPU host the op compiles the kernel for the TPU (matmul above), and the
# cells that run it on the CPU ask that of the CPU: the jit-auto cells' meshes
# of simulated CPU devices, the CPU export and its symbolic one. Pallas then
# refuses, as it should: only the interpreter runs a TPU kernel on a CPU.
_TPU_KERNEL_ON_THE_CPU = Refuse(
    ValueError,
    "Only interpret mode is supported on CPU backend",
    "on a TPU host the op compiles the kernel for the TPU, which the CPU devices "
    "of this cell cannot run (the TPU interpreter can: force_tpu_interpret_mode)",
)
_MATMUL_REFUSES = {
    "shard-map-*": _SHARD_MAP,
    "jit-explicit-*": _EXPLICIT,
    "grad-grad-explicit-*": _EXPLICIT,
    "lower-cpu": _INTERPRETER_EXPORT,
    "export-symbolic": _SYMBOLIC,
    **dict.fromkeys(
        (
            "grad-*",
            "vjp",
            "jit-grad",
            "jvp",
            "check-grads-*",
            "vmap-of-grad*",
            "checkpoint",
            "scan",
            "cond",
            "jit-auto-*",
            # Sizes that fit the blocks: values, then the gradient.
            "size-*-large",
        ),
        _NO_AUTODIFF,
    ),
}
if ON_A_TPU_HOST:
    _MATMUL_REFUSES.update(
        dict.fromkeys(("lower-cpu", "export-symbolic", "jit-auto-*"), _TPU_KERNEL_ON_THE_CPU)
    )

# A float32 matmul of k = 128 terms overflows where |x| |y| k passes float32's
# largest number: the hard cells' huge case stays below it (sqrt(max / k) is 1.6e18).
_MATMUL_DOMAIN = (-1e18, 1e18)


def _matmul(name, sizes):
    return OpSpec(
        name=name,
        op=matmul,
        reference=matmul_reference,
        oracle=matmul_oracle,
        # The long form, for each argument's domain (or, in one line,
        # signature="x[m,k], y[k,n] -> [m,n]" with arg_options={"x": {"domain": ...}, ...}).
        args=(
            Arg("x", ("m", "k"), domain=_MATMUL_DOMAIN),
            Arg("y", ("k", "n"), domain=_MATMUL_DOMAIN),
        ),
        outputs=(("m", "n"),),
        sizes=sizes,
        # A float32 dot of 128 terms, accumulated in float32: its terms cancel,
        # so the rounding counts at the size of the result's largest elements
        # (at_scale), not at a small element it leaves.
        tolerance=Ulps(4, 16),
        gradient_tolerance=Ulps(4, 16),
        shard_map_axes=("m",),
        symbolic_axis="m",
        # Not measured here: what the kernel's jnp.dot keeps of float32 on the TPU's
        # matrix unit at its default precision (one bfloat16 pass at worst).
        matmul_inputs={"tpu": "bfloat16"},
        refuse=_MATMUL_REFUSES,
    )


# On the blocks: 24 rows are three blocks of 8, 128 columns and 128 of k one
# block each. What the kernel does where its shapes fit.
MATMUL = _matmul("pallas.ops.tpu.matmul", {"m": 24, "k": 128, "n": 128})
# Off the blocks: 20 rows are two blocks of 8 and 4 rows more, which the grid
# (20 // 8 = 2 blocks) never writes.
MATMUL_RAGGED = _matmul("pallas.ops.tpu.matmul (ragged m)", {"m": 20, "k": 128, "n": 128})


SPECS = [
    SOFTMAX,
    GELU_EXACT,
    GELU_TANH,
    *([SIMPLEX, SIMPLEX_64] if projection_simplex else []),
    MATMUL,
    MATMUL_RAGGED,
]
