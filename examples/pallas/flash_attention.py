"""Flash attention for TPU (Pallas / Mosaic TPU), forward and backward, with `jax.custom_vjp`.

    out = softmax(q @ k^T * scale [+ causal mask]) @ v        (per batch-head, single head)

`flash_attention(q, k, v, ...)` takes q (..., Lq, D) and k, v (..., Lk, D) with the same
leading (batch, heads, ...) dims. The leading dims are flattened into one batch-heads axis,
which becomes the first ("parallel") axis of every kernel grid. Three kernels:

- forward: grid (batch-heads, q blocks, k blocks). For one q block it streams the k/v blocks
  through VMEM and keeps the online softmax state (running row max `m`, running row sum `l`,
  unnormalised output `acc`) in VMEM scratch; at the last k block it writes `out = acc / l` and
  the row log-sum-exp `lse = m + log(l)`, the only extra thing the backward needs.
- dK/dV: grid (batch-heads, k blocks, q blocks). For one k/v block it streams the q blocks,
  recomputes `p = exp(s - lse)` and accumulates dV += p^T dO and dK += dS^T q * scale, with
  dS = p * (dO v^T - delta) and delta = rowsum(dO * out) (FlashAttention-2).
- dQ: grid (batch-heads, q blocks, k blocks). Same recomputation, accumulates dQ += dS k * scale.

Ragged lengths: the wrapper pads the sequences with zeros up to a whole number of blocks and
slices the result; the kernels mask the padded key columns (score -inf, probability 0). See
README.md for why.
"""

import dataclasses
import functools
import math
import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

__all__ = [
    "BlockPlan",
    "attention_with_plan",
    "default_interpret",
    "flash_attention",
    "plan_blocks",
    "tpu_block_shape_error",
]

# TPU vector registers are (8 sublanes x 128 lanes) tiles: Mosaic needs the last two dims of
# every block to be multiples of (8, 128), unless a dim spans the whole array dim.
SUBLANES, LANES = 8, 128

# Grid axes: (batch-heads, outer block axis, reduction axis). The first two can run in any
# order or on different cores; the last one carries the VMEM accumulators from step to step
# and must run in order.
DIMENSION_SEMANTICS = ("parallel", "parallel", "arbitrary")


def tpu_block_shape_error(block_shape, array_shape):
    """The reason Mosaic TPU would reject this block of this array, or None if it is fine.

    The rule (checked by Pallas's TPU lowering, not by interpret mode): the last block dim must
    be a multiple of 128 or equal the array's last dim, and the second-to-last a multiple of 8
    or equal the array's.
    """
    (b1, b0), (a1, a0) = block_shape[-2:], array_shape[-2:]
    problems = []
    if b0 != a0 and b0 % LANES:
        problems.append(f"last dim {b0} is neither a multiple of {LANES} nor the array's {a0}")
    if b1 != a1 and b1 % SUBLANES:
        problems.append(
            f"second-to-last dim {b1} is neither a multiple of {SUBLANES} nor the array's {a1}"
        )
    return "; ".join(problems) or None


class BlockPlan(NamedTuple):
    """Static tiling of one attention call; `plan_blocks` builds and validates it."""

    block_q: int  # rows of q per block (second-to-last dim of the q, dO, out, lse blocks)
    block_k: int  # rows of k/v per block (second-to-last dim of the k, v, dK, dV blocks)
    q_len: int  # true query length
    kv_len: int  # true key/value length
    q_pad: int  # q_len rounded up to a multiple of block_q
    kv_pad: int  # kv_len rounded up to a multiple of block_k
    head_dim: int


def _round_up(x, m):
    return -(-x // m) * m


def plan_blocks(q_len, kv_len, head_dim, block_q=128, block_k=128):
    """Choose padded lengths for the requested block sizes and check them against TPU rules.

    A block larger than the sequence (rounded up to 8) is shrunk to it: a 200-row block for a
    50-token sequence would only compute on padding. Raises ValueError, naming the operand,
    when a block would break the TPU tiling rule (see `tpu_block_shape_error`), so the mistake
    shows up on the CPU in interpret mode too, where nothing else would catch it.
    """
    for name, value in (("block_q", block_q), ("block_k", block_k)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    block_q, block_k = int(block_q), int(block_k)
    for name, value in (("q length", q_len), ("kv length", kv_len), ("head dim", head_dim)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    block_q = min(block_q, _round_up(q_len, SUBLANES))
    block_k = min(block_k, _round_up(kv_len, SUBLANES))
    plan = BlockPlan(
        block_q=block_q,
        block_k=block_k,
        q_len=q_len,
        kv_len=kv_len,
        q_pad=_round_up(q_len, block_q),
        kv_pad=_round_up(kv_len, block_k),
        head_dim=head_dim,
    )
    for name, block, length in (
        ("block_q", block_q, plan.q_pad),
        ("block_k", block_k, plan.kv_pad),
    ):
        error = tpu_block_shape_error((block, head_dim), (length, head_dim))
        if error:
            raise ValueError(
                f"{name}={block} is not a valid TPU block for a sequence padded to {length} "
                f"with head dim {head_dim}: {error}. Blocks of q/k/v are ({name}, head_dim); "
                f"use a multiple of {SUBLANES} for {name}."
            )
    return plan


@dataclasses.dataclass(frozen=True)
class _Config:
    """Everything static about one call (hashable: it is a custom_vjp nondiff argument)."""

    plan: BlockPlan
    causal: bool
    scale: float
    interpret: Any  # False (compile for TPU), True (HLO interpreter) or pltpu.InterpretParams
    dimension_semantics: tuple[str, ...] = DIMENSION_SEMANTICS


# --- masks and causal block skipping -----------------------------------------------------------


def _valid_mask(cfg, q_block, k_block):
    """Boolean (block_q, block_k) mask of the score entries that take part, or None if all do.

    Masks padded key columns and, if causal, keys after the query (key index > query index).
    Padded query rows need no mask: the forward's values for them are sliced off, and in the
    backward their output cotangent rows are zero (the cotangent of that slice), which makes
    their dS and their dV contribution exactly zero.
    """
    p = cfg.plan
    shape = (p.block_q, p.block_k)
    mask = None
    if cfg.causal or p.kv_pad != p.kv_len:
        cols = k_block * p.block_k + lax.broadcasted_iota(jnp.int32, shape, 1)
    if p.kv_pad != p.kv_len:
        mask = cols < p.kv_len
    if cfg.causal:
        rows = q_block * p.block_q + lax.broadcasted_iota(jnp.int32, shape, 0)
        causal = cols <= rows
        mask = causal if mask is None else mask & causal
    return mask


def _last_k_block_needed(cfg, q_block):
    """Causal: the last k block with any key <= the last query row of this q block."""
    p = cfg.plan
    # lax.div truncates; the indices are >= 0, where that equals floor division, and it lowers
    # to a plain scalar divide. (Python's // on traced ints adds sign fix-ups whose Mosaic
    # lowering asks for the TPU generation, unknown when lowering on a CPU host.) int32
    # divisor: lax.div does not promote, and program ids are int32 even with jax_enable_x64.
    return lax.div((q_block + 1) * p.block_q - 1, jnp.int32(p.block_k))


def _first_q_block_needed(cfg, k_block):
    """Causal: the first q block with any query row >= the first key of this k block."""
    p = cfg.plan
    return lax.div(k_block * p.block_k, jnp.int32(p.block_q))


def _when_needed(cfg, q_block, k_block, body):
    """Run body() unless causal masking hides the whole (q block, k block) tile."""
    if cfg.causal:
        pl.when(k_block <= _last_k_block_needed(cfg, q_block))(body)
    else:
        body()


# dot_general dimension numbers: a @ b, a @ b^T, a^T @ b (without materialising a transpose).
_NN = (((1,), (0,)), ((), ()))
_NT = (((1,), (1,)), ((), ()))
_TN = (((0,), (0,)), ((), ()))


def _dot(a, b, dimension_numbers):
    """A matmul on the MXU, accumulated in float32, at the precision of the operands' dtype.

    float32 operands ask for HIGHEST: at the default precision a TPU multiplies float32 in one
    bfloat16 pass (on a TPU v5e, float32 attention at the default precision came out a few
    1e-3 of its scale off float64): bfloat16 accuracy for float32 inputs. bfloat16 operands
    need one pass: DEFAULT.
    """
    precision = lax.Precision.HIGHEST if a.dtype == jnp.float32 else lax.Precision.DEFAULT
    return lax.dot_general(
        a, b, dimension_numbers, precision=precision, preferred_element_type=jnp.float32
    )


def _scores(cfg, q, k):
    """s = q k^T * scale in float32 (bf16 inputs go to the MXU as bf16, accumulate in f32)."""
    s = _dot(q, k, _NT)
    return s * cfg.scale


def _probabilities(cfg, q, k, lse, q_block, k_block):
    """Backward recomputation: p = exp(s - lse), exactly 0 outside the mask."""
    p = jnp.exp(_scores(cfg, q, k) - lse)
    mask = _valid_mask(cfg, q_block, k_block)
    return p if mask is None else jnp.where(mask, p, 0.0)


# --- forward -----------------------------------------------------------------------------------


def _forward_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, m_scr, l_scr, acc_scr, *, cfg):
    q_block, k_block = pl.program_id(1), pl.program_id(2)

    @pl.when(k_block == 0)
    def _init():
        m_scr[...] = jnp.full(m_scr.shape, -jnp.inf, jnp.float32)
        l_scr[...] = jnp.zeros(l_scr.shape, jnp.float32)
        acc_scr[...] = jnp.zeros(acc_scr.shape, jnp.float32)

    def _step():
        s = _scores(cfg, q_ref[...], k_ref[...])
        mask = _valid_mask(cfg, q_block, k_block)
        if mask is not None:
            s = jnp.where(mask, s, -jnp.inf)
        # m_new is finite: k block 0 is never skipped and comes first, and its key 0 is valid
        # for every row (never padding, never after the query). So masked entries give
        # exp(-inf - m_new) = 0, and the first step's alpha = exp(-inf - m_new) = 0.
        m_prev = m_scr[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)  # rescales what was accumulated under the old max
        p = jnp.exp(s - m_new)
        l_scr[...] = alpha * l_scr[...] + jnp.sum(p, axis=1, keepdims=True)
        v = v_ref[...]
        pv = _dot(p.astype(v.dtype), v, _NN)
        acc_scr[...] = alpha * acc_scr[...] + pv
        m_scr[...] = m_new

    _when_needed(cfg, q_block, k_block, _step)

    @pl.when(k_block == pl.num_programs(2) - 1)
    def _finish():
        # l >= 1 here: the row max contributes exp(0) = 1.
        l_sum = l_scr[...]
        o_ref[...] = (acc_scr[...] / l_sum).astype(o_ref.dtype)
        lse_ref[...] = m_scr[...] + jnp.log(l_sum)


def _k_index_map(cfg):
    """k/v block index for grid point (b, q block, k block).

    Causal: a k block past the diagonal is skipped by the kernel; mapping it to the last block
    that is needed makes the index repeat, and the pipeline skips the copy of a block it
    already holds, so skipped steps cost no HBM traffic either.
    """
    if cfg.causal:
        return lambda b, i, j: (b, jnp.minimum(j, _last_k_block_needed(cfg, i)), 0)
    return lambda b, i, j: (b, j, 0)


def _q_index_map_transposed(cfg):
    """q-side block index for the dK/dV grid (b, k block, q block); causal: skip the copy of
    q blocks entirely before the k block, as in `_k_index_map`."""
    if cfg.causal:
        return lambda b, j, i: (b, jnp.maximum(i, _first_q_block_needed(cfg, j)), 0)
    return lambda b, j, i: (b, i, 0)


def _compiler_params(cfg):
    return pltpu.CompilerParams(dimension_semantics=cfg.dimension_semantics)


def _cost(cfg, matmuls, operands):
    """Rough cost for XLA's scheduler: `matmuls` (L x L x D) products per batch-head, one exp
    per score, every operand read or written once (a lower bound: the streamed side is reread
    once per block of the other side)."""
    p = cfg.plan
    bh = operands[0].shape[0]
    scores = bh * p.q_pad * p.kv_pad // (2 if cfg.causal else 1)
    return pl.CostEstimate(
        flops=2 * matmuls * scores * p.head_dim,
        transcendentals=scores,
        bytes_accessed=sum(x.size * x.dtype.itemsize for x in operands),
    )


def _forward_call(cfg, q, k, v):
    """Padded q (BH, q_pad, D), k/v (BH, kv_pad, D) -> out (BH, q_pad, D), lse (BH, q_pad, 1)."""
    p = cfg.plan
    bh, d = q.shape[0], p.head_dim
    # Squeezed (None) batch-heads dim: the kernel sees (block, D) refs.
    q_spec = pl.BlockSpec((None, p.block_q, d), lambda b, i, j: (b, i, 0))
    kv_spec = pl.BlockSpec((None, p.block_k, d), _k_index_map(cfg))
    row_spec = pl.BlockSpec((None, p.block_q, 1), lambda b, i, j: (b, i, 0))
    return pl.pallas_call(
        functools.partial(_forward_kernel, cfg=cfg),
        grid=(bh, p.q_pad // p.block_q, p.kv_pad // p.block_k),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=[q_spec, row_spec],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((bh, p.q_pad, 1), jnp.float32),
        ],
        scratch_shapes=[
            pltpu.VMEM((p.block_q, 1), jnp.float32),  # m: running row max
            pltpu.VMEM((p.block_q, 1), jnp.float32),  # l: running row sum of exp(s - m)
            pltpu.VMEM((p.block_q, d), jnp.float32),  # acc: running sum of exp(s - m) @ v
        ],
        compiler_params=_compiler_params(cfg),
        cost_estimate=_cost(cfg, 2, (q, k, v, q)),
        interpret=cfg.interpret,
        name="flash_attention_forward",
    )(q, k, v)


# --- backward ----------------------------------------------------------------------------------


def _dkdv_kernel(
    q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_scr, dv_scr, *, cfg
):
    k_block, q_block = pl.program_id(1), pl.program_id(2)

    @pl.when(q_block == 0)
    def _init():
        dk_scr[...] = jnp.zeros(dk_scr.shape, jnp.float32)
        dv_scr[...] = jnp.zeros(dv_scr.shape, jnp.float32)

    def _step():
        q, k, v, do = q_ref[...], k_ref[...], v_ref[...], do_ref[...]
        p = _probabilities(cfg, q, k, lse_ref[...], q_block, k_block)  # (bq, bk)
        dv_scr[...] += _dot(p.astype(do.dtype), do, _TN)  # p^T @ dO
        dp = _dot(do, v, _NT)
        ds = p * (dp - delta_ref[...])
        dk_scr[...] += cfg.scale * _dot(ds.astype(q.dtype), q, _TN)

    if cfg.causal:
        pl.when(q_block >= _first_q_block_needed(cfg, k_block))(_step)
    else:
        _step()

    @pl.when(q_block == pl.num_programs(2) - 1)
    def _finish():
        dk_ref[...] = dk_scr[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_scr[...].astype(dv_ref.dtype)


def _dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, dq_scr, *, cfg):
    q_block, k_block = pl.program_id(1), pl.program_id(2)

    @pl.when(k_block == 0)
    def _init():
        dq_scr[...] = jnp.zeros(dq_scr.shape, jnp.float32)

    def _step():
        q, k, v, do = q_ref[...], k_ref[...], v_ref[...], do_ref[...]
        p = _probabilities(cfg, q, k, lse_ref[...], q_block, k_block)
        dp = _dot(do, v, _NT)
        ds = p * (dp - delta_ref[...])
        dq_scr[...] += cfg.scale * _dot(ds.astype(k.dtype), k, _NN)

    _when_needed(cfg, q_block, k_block, _step)

    @pl.when(k_block == pl.num_programs(2) - 1)
    def _finish():
        dq_ref[...] = dq_scr[...].astype(dq_ref.dtype)


def _backward_calls(cfg, q, k, v, out, lse, do):
    """FlashAttention-2 backward on padded arrays: (dq, dk, dv)."""
    p = cfg.plan
    bh, d = q.shape[0], p.head_dim
    nq, nk = p.q_pad // p.block_q, p.kv_pad // p.block_k
    # delta_i = sum_j p_ij dp_ij = rowsum(dO * out): one cheap elementwise pass, left to XLA.
    delta = jnp.sum(do.astype(jnp.float32) * out.astype(jnp.float32), axis=-1, keepdims=True)

    # dK/dV: grid (b, k block j, q block i); the q side streams.
    q_map = _q_index_map_transposed(cfg)
    q_side = pl.BlockSpec((None, p.block_q, d), q_map)
    q_rows = pl.BlockSpec((None, p.block_q, 1), q_map)
    kv_fixed = pl.BlockSpec((None, p.block_k, d), lambda b, j, i: (b, j, 0))
    dk, dv = pl.pallas_call(
        functools.partial(_dkdv_kernel, cfg=cfg),
        grid=(bh, nk, nq),
        in_specs=[q_side, kv_fixed, kv_fixed, q_side, q_rows, q_rows],
        out_specs=[kv_fixed, kv_fixed],
        out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
        scratch_shapes=[
            pltpu.VMEM((p.block_k, d), jnp.float32),
            pltpu.VMEM((p.block_k, d), jnp.float32),
        ],
        compiler_params=_compiler_params(cfg),
        cost_estimate=_cost(cfg, 4, (q, k, v, do, k, v)),
        interpret=cfg.interpret,
        name="flash_attention_dkdv",
    )(q, k, v, do, lse, delta)

    # dQ: grid (b, q block i, k block j); the k/v side streams.
    q_fixed = pl.BlockSpec((None, p.block_q, d), lambda b, i, j: (b, i, 0))
    rows_fixed = pl.BlockSpec((None, p.block_q, 1), lambda b, i, j: (b, i, 0))
    kv_side = pl.BlockSpec((None, p.block_k, d), _k_index_map(cfg))
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, cfg=cfg),
        grid=(bh, nq, nk),
        in_specs=[q_fixed, kv_side, kv_side, q_fixed, rows_fixed, rows_fixed],
        out_specs=q_fixed,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((p.block_q, d), jnp.float32)],
        compiler_params=_compiler_params(cfg),
        cost_estimate=_cost(cfg, 3, (q, k, v, do, q)),
        interpret=cfg.interpret,
        name="flash_attention_dq",
    )(q, k, v, do, lse, delta)
    return dq, dk, dv


# --- custom_vjp wiring -------------------------------------------------------------------------


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention_padded(cfg, q, k, v):
    return _forward_call(cfg, q, k, v)[0]


def _attention_padded_fwd(cfg, q, k, v):
    out, lse = _forward_call(cfg, q, k, v)
    return out, (q, k, v, out, lse)


def _attention_padded_bwd(cfg, residuals, do):
    return _backward_calls(cfg, *residuals, do)


_attention_padded.defvjp(_attention_padded_fwd, _attention_padded_bwd)


def attention_with_plan(q, k, v, plan, *, causal, scale, interpret, dimension_semantics=None):
    """`flash_attention` with a given, *unvalidated* BlockPlan (q, k, v: (BH, L, D)).

    For tests and experiments: it lets a block shape that TPU would reject reach the kernels.
    Pads to the plan's lengths, runs the custom_vjp kernels, slices the padding off. AD of the
    pad and the slice is ordinary JAX, and gives the kernels a zero-padded output cotangent.
    """
    cfg = _Config(
        plan=plan,
        causal=causal,
        scale=scale,
        interpret=interpret,
        dimension_semantics=dimension_semantics or DIMENSION_SEMANTICS,
    )
    q_extra, kv_extra = plan.q_pad - plan.q_len, plan.kv_pad - plan.kv_len
    q = jnp.pad(q, ((0, 0), (0, q_extra), (0, 0)))
    k = jnp.pad(k, ((0, 0), (0, kv_extra), (0, 0)))
    v = jnp.pad(v, ((0, 0), (0, kv_extra), (0, 0)))
    return _attention_padded(cfg, q, k, v)[:, : plan.q_len]


def default_interpret():
    """Compile for TPU where the call runs on a TPU; anywhere else run the kernels in Pallas
    interpret mode.

    "Where the call runs" is the default device: `jax.default_device(...)` (or the
    `jax_default_device` setting) if set, else the default backend's. So on a TPU host, under
    `with jax.default_device(jax.devices("cpu")[0])`, the kernels are interpreted on the CPU
    (a compiled Mosaic kernel cannot run there). Inputs committed to another device than the
    default one need an explicit `interpret=`.
    """
    device = jax.config.jax_default_device  # None, a Device or a platform name
    platform = jax.default_backend() if device is None else getattr(device, "platform", device)
    return platform != "tpu"


def flash_attention(q, k, v, *, causal=False, scale=None, block_q=128, block_k=128, interpret=None):
    """softmax(q k^T * scale [+ causal mask]) v, computed blockwise without the L x L matrix.

    Args:
      q: (..., Lq, D); k, v: (..., Lk, D), same leading dims and dtype (float32 or bfloat16).
      causal: query i attends to keys 0..i (needs Lq == Lk).
      scale: defaults to 1 / sqrt(D).
      block_q, block_k: rows of q and of k/v per kernel block; multiples of 8 (TPU tiling),
        shrunk to the sequence length when larger. Checked up front (ValueError).
      interpret: None (default: interpret mode unless the default device is a TPU), False
        (compile with Mosaic for TPU), True (Pallas HLO interpreter) or a
        `pltpu.InterpretParams` (TPU interpreter: simulated VMEM/DMA, race detection,
        NaN-poisoned uninitialised memory).

    Returns (..., Lq, D) in q's dtype. Differentiable (reverse mode) in q, k and v.
    """
    if q.ndim < 2 or k.ndim != q.ndim or v.shape != k.shape:
        raise ValueError(
            f"expected q (..., Lq, D) and k, v (..., Lk, D) with the same leading dims; got "
            f"q {q.shape}, k {k.shape}, v {v.shape}"
        )
    if q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} and k {k.shape} differ in leading dims or head dim")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (jnp.float32, jnp.bfloat16):
        raise TypeError(
            f"q, k, v must all be float32 or all bfloat16; got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    *lead, q_len, head_dim = q.shape
    kv_len = k.shape[-2]
    if causal and q_len != kv_len:
        raise ValueError(f"causal attention needs Lq == Lk, got {q_len} and {kv_len}")
    plan = plan_blocks(q_len, kv_len, head_dim, block_q, block_k)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    if interpret is None:
        interpret = default_interpret()

    bh = math.prod(lead)
    out = attention_with_plan(
        q.reshape(bh, q_len, head_dim),
        k.reshape(bh, kv_len, head_dim),
        v.reshape(bh, kv_len, head_dim),
        plan,
        causal=causal,
        scale=scale,
        interpret=interpret,
    )
    return out.reshape(*lead, q_len, head_dim)
