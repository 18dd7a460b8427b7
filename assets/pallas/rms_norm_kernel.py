"""A Pallas TPU kernel skeleton: RMSNorm over the last axis, forward and backward kernels.

The op, one row at a time (n rows of d features, statistics in float32 for bfloat16 inputs):

    rms_norm(x, weight)[i] = x[i] / sqrt(mean(x[i] ** 2) + eps) * weight

    x: (n, d) float32 or bfloat16, weight: (d,) float32 or bfloat16 -> (n, d) in x's dtype

When a Pallas kernel is worth it. Write one for a *measured* hotspot (a profile, not a guess)
that XLA handles badly, typically a memory-bound chain it does not fuse into one pass over HBM:
a norm fused with the residual add before it or the quantisation after it, a backward pass that
XLA splits into several reads of the activations, a custom reduction. A memory-bound kernel
wins by reading each input once and writing each output once, so its ceiling is
(bytes moved) / (HBM bandwidth): compare your timing against that number. Do not write one when
XLA already fuses the op (on TPU it usually fuses a plain RMSNorm forward well: check the
profile first), when the op is compute-bound and maps onto a library matmul or convolution,
or when you need the code to run on every backend: a Pallas TPU kernel is TPU-only, and the
interpreter used elsewhere is for testing (it is orders of magnitude slower).

How this kernel is laid out. The grid walks row blocks: step i copies rows
[i * block_rows, (i + 1) * block_rows) of x (and of the cotangent, in the backward kernel) from
HBM into VMEM, Pallas double-buffers those copies behind the compute, and each block holds whole
rows, so the row statistics never leave VMEM. When block_rows does not divide n, the last block
hangs over the end of the array: what it reads there is undefined (NaN under the strict
interpreter, stale data on a TPU) and what it writes there is dropped. The forward kernel is
row-wise, so garbage rows only produce garbage outputs that are dropped; the backward kernel sums
over rows for the weight gradient, so it must mask those rows out (see ``_backward_kernel``).

The backward pass is a second kernel (``jax.custom_vjp``). It recomputes the row statistic from
x instead of saving it: x must be read again anyway, so recomputing costs no extra HBM traffic,
while saving it would cost a write and a read of n floats.

To adapt: change ``_forward_kernel`` / ``_backward_kernel`` (the math on one VMEM block),
``_forward_call`` / ``_backward_call`` (grid, BlockSpecs, scratch, dimension semantics),
``rms_norm_reference`` (the same op in plain JAX, the oracle whose autodiff checks your
hand-written backward), ``rms_norm_numpy`` (an independent float64 implementation),
``check_block_rows`` (what your target accepts) and the checks in ``main()``. Inputs with more
leading axes: reshape to (-1, d) and back. Run ``python rms_norm_kernel.py``; it runs the
kernels in interpret mode on any machine, lowers them for TPU on this host, and exits non-zero on
any failure.
"""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# Add a dtype here only after checking the kernel (and the tolerances in main) for it.
SUPPORTED_DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16))
# A memory-bound kernel wants big blocks: each grid step has a fixed cost (a fraction of a
# microsecond), so small blocks spend more time stepping than moving bytes. Tune by timing.
DEFAULT_BLOCK_ROWS = 256
# The validation refuses blocks whose rough VMEM footprint (_vmem_bytes) exceeds this. 16 MiB
# is a conservative scoped-VMEM limit (the default varies by TPU generation); to use more,
# raise this together with pltpu.CompilerParams(vmem_limit_bytes=...) in the pallas_calls.
VMEM_BUDGET_BYTES = 16 * 2**20
# Mosaic TPU tiles memory as (8, 128): a block's last two dimensions must be multiples of
# (8, 128) or span the whole array. Blocks here span whole rows, so only rows are checked.
# (Packed dtypes fill whole tiles at 16 rows for bfloat16, 32 for int8: prefer those sizes.)
SUBLANES = 8
# Strict interpretation: a data race raises, and memory nobody wrote reads as NaN, so a missing
# write or an unmasked ragged edge shows up as a NaN or a wrong value. Races need two threads:
# with the default one, "parallel" grid steps never overlap and no race can be seen
# (check_strict_interpreter proves the detector fires on a racy kernel).
STRICT_INTERPRET = pltpu.InterpretParams(
    detect_races=True,
    on_race="raise",
    num_cores_or_threads=2,
    uninitialized_memory="nan",
    out_of_bounds_reads="raise",
)


# --------------------------------------------------------------------------------------------
# The public function: validate, then call the custom_vjp
# --------------------------------------------------------------------------------------------


def rms_norm(x, weight, *, eps=1e-6, block_rows=DEFAULT_BLOCK_ROWS, interpret=None):
    """RMSNorm over the last axis of a 2-D ``x``: ``x / sqrt(mean(x**2) + eps) * weight``.

    interpret: None runs the kernel natively on a TPU and interpreted on the CPU elsewhere;
    True / False force it; a ``pltpu.InterpretParams`` selects the TPU interpreter (see
    ``STRICT_INTERPRET``). Differentiable in x and weight with reverse mode (grad, vjp).
    """
    # Convert only non-JAX inputs (NumPy arrays, lists); JAX arrays and tracers pass through.
    x = x if isinstance(x, jax.Array) else jnp.asarray(x)
    weight = weight if isinstance(weight, jax.Array) else jnp.asarray(weight)
    _check_inputs(x, weight, eps)
    block_rows = check_block_rows(block_rows, x.shape, x.dtype, weight.dtype)
    return _rms_norm(x, weight, float(eps), block_rows, _interpret(interpret))


def _check_inputs(x, weight, eps):
    # Shapes and dtypes are static, so these checks also run (once, at trace time) under jit.
    for name, value in (("x", x), ("weight", weight)):
        if value.dtype not in SUPPORTED_DTYPES:
            supported = ", ".join(d.name for d in SUPPORTED_DTYPES)
            raise TypeError(f"{name} must have dtype {supported}; got {value.dtype}")
    if x.ndim != 2:
        raise ValueError(
            f"x must have shape (rows, features), got {x.shape}; "
            "reshape other ranks with x.reshape(-1, x.shape[-1])"
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must have at least one row and one feature, got {x.shape}")
    if weight.shape != x.shape[1:]:
        raise ValueError(
            f"weight must have shape ({x.shape[1]},) to match x {x.shape}, got {weight.shape}"
        )
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps >= 0:
        raise ValueError(f"eps must be a non-negative Python number, got {eps!r}")


def check_block_rows(block_rows, x_shape, x_dtype, weight_dtype):
    """Validate a row block for TPU before anything is lowered; return it clamped to n."""
    n, d = x_shape
    if isinstance(block_rows, bool) or not isinstance(block_rows, int) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive int, got {block_rows!r}")
    block_rows = min(block_rows, n)
    if block_rows != n and block_rows % SUBLANES:
        raise ValueError(
            f"block_rows={block_rows} is invalid on TPU for x of shape {tuple(x_shape)}: it must "
            f"be a multiple of {SUBLANES} or equal the number of rows ({n})"
        )
    per_row, fixed = _vmem_bytes(d, x_dtype, weight_dtype)
    need = block_rows * per_row + fixed
    if need > VMEM_BUDGET_BYTES:
        fits = (VMEM_BUDGET_BYTES - fixed) // per_row // SUBLANES * SUBLANES
        hint = f"use block_rows <= {fits}" if fits > 0 else f"d={d} is too large for this kernel"
        raise ValueError(
            f"block_rows={block_rows} needs ~{need / 2**20:.1f} MiB of VMEM for d={d}, over "
            f"VMEM_BUDGET_BYTES ({VMEM_BUDGET_BYTES / 2**20:.0f} MiB): {hint}"
        )
    return block_rows


def _vmem_bytes(d, x_dtype, weight_dtype):
    """A rough VMEM estimate, (bytes per block row, fixed bytes), of the larger kernel.

    The backward kernel: x and dy in, dx out, each double-buffered; ~4 float32 temporaries of
    the block; weight in and dweight out (double-buffered) and the float32 accumulator. On a
    TPU the compiler's own accounting decides; this only turns an obvious misfit into a clear
    error here instead of a compile failure there.
    """
    x_bytes, w_bytes = jnp.dtype(x_dtype).itemsize, jnp.dtype(weight_dtype).itemsize
    return d * (2 * 3 * x_bytes + 4 * 4), d * (2 * 2 * w_bytes + 4)


def _interpret(interpret):
    """Run the kernel natively on a TPU, interpreted (on the CPU) elsewhere."""
    if interpret is None:
        return jax.default_backend() != "tpu"
    return interpret


# --------------------------------------------------------------------------------------------
# custom_vjp: the forward kernel, and the backward kernel as its VJP
# --------------------------------------------------------------------------------------------


# eps, block_rows and interpret are Python values baked into the kernels, so nondiff_argnums.
@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _rms_norm(x, weight, eps, block_rows, interpret):
    return _forward_call(x, weight, eps=eps, block_rows=block_rows, interpret=interpret)


def _rms_norm_fwd(x, weight, eps, block_rows, interpret):
    y = _forward_call(x, weight, eps=eps, block_rows=block_rows, interpret=interpret)
    # The residuals are the inputs themselves: no new memory (the statistic is recomputed).
    return y, (x, weight)


def _rms_norm_bwd(eps, block_rows, interpret, residuals, dy):
    x, weight = residuals
    return _backward_call(x, weight, dy, eps=eps, block_rows=block_rows, interpret=interpret)


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


def _forward_call(x, weight, *, eps, block_rows, interpret):
    """The forward pallas_call. No validation here: rms_norm validates first."""
    n, d = x.shape
    rows = pl.BlockSpec((block_rows, d), lambda i: (i, 0))  # row block i, all features
    whole_weight = pl.BlockSpec((1, d), lambda i: (0, 0))  # same block every step: copied once
    return pl.pallas_call(
        functools.partial(_forward_kernel, eps=eps),
        grid=(pl.cdiv(n, block_rows),),
        in_specs=[rows, whole_weight],
        out_specs=rows,
        out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),
        # Row blocks are independent: "parallel" lets Megacore chips split them across cores.
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        interpret=interpret,
    )(x, weight.reshape(1, d))  # 2-D, because TPU blocks are tiled over the last two axes


def _forward_kernel(x_ref, w_ref, y_ref, *, eps):
    # Refs are VMEM blocks: x_ref (block_rows, d), w_ref (1, d), y_ref (block_rows, d).
    x = x_ref[...].astype(jnp.float32)
    inv_rms = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + eps)  # (block_rows, 1)
    y_ref[...] = (x * inv_rms * w_ref[...].astype(jnp.float32)).astype(y_ref.dtype)


def _backward_call(x, weight, dy, *, eps, block_rows, interpret):
    """The backward pallas_call: (dx, dweight) from one pass over x and dy."""
    n, d = x.shape
    rows = pl.BlockSpec((block_rows, d), lambda i: (i, 0))
    whole_weight = pl.BlockSpec((1, d), lambda i: (0, 0))
    dx, dweight = pl.pallas_call(
        functools.partial(_backward_kernel, eps=eps, n_rows=n, block_rows=block_rows),
        grid=(pl.cdiv(n, block_rows),),
        in_specs=[rows, whole_weight, rows],
        # dweight's block index never changes, so it stays in VMEM for the whole grid and is
        # written back to HBM once, after the last step.
        out_specs=[rows, whole_weight],
        out_shape=[
            jax.ShapeDtypeStruct((n, d), x.dtype),
            jax.ShapeDtypeStruct((1, d), weight.dtype),
        ],
        # The float32 accumulator for dweight, summed over the row blocks.
        scratch_shapes=[pltpu.VMEM((1, d), jnp.float32)],
        # The accumulator makes the steps depend on each other: "arbitrary" keeps them in order
        # on one core. (To use both cores of a Megacore chip, write per-block partial sums to
        # an (n_blocks, 1, d) output instead, keep the grid "parallel", and sum them in JAX.)
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(x, weight.reshape(1, d), dy)
    return dx, dweight.reshape(d)


def _backward_kernel(x_ref, w_ref, dy_ref, dx_ref, dw_ref, dw_acc, *, eps, n_rows, block_rows):
    i = pl.program_id(0)

    @pl.when(i == 0)
    def _init():
        dw_acc[...] = jnp.zeros_like(dw_acc)

    x = x_ref[...].astype(jnp.float32)
    dy = dy_ref[...].astype(jnp.float32)
    inv_rms = jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + eps)
    x_hat = x * inv_rms
    # y = x_hat * w with x_hat = x * r, r = (mean(x**2) + eps) ** -0.5, dr/dx = -r**3 x / d:
    #   dx = r * (dy * w - x_hat * mean(dy * w * x_hat))   (per row),   dw = sum_rows dy * x_hat
    dy_w = dy * w_ref[...].astype(jnp.float32)
    dx = inv_rms * (dy_w - x_hat * jnp.mean(dy_w * x_hat, axis=1, keepdims=True))
    dx_ref[...] = dx.astype(dx_ref.dtype)  # rows past n are dropped on the way back to HBM

    dw_rows = dy * x_hat
    if n_rows % block_rows:
        # The last block's rows past n hold garbage (NaN in strict interpret mode). The sum
        # below mixes rows, so zero them with where (garbage * 0 is still NaN).
        row = i * block_rows + jax.lax.broadcasted_iota(jnp.int32, dw_rows.shape, 0)
        dw_rows = jnp.where(row < n_rows, dw_rows, 0.0)
    dw_acc[...] += jnp.sum(dw_rows, axis=0, keepdims=True)

    @pl.when(i == pl.num_programs(0) - 1)
    def _finish():
        dw_ref[...] = dw_acc[...].astype(dw_ref.dtype)


# --------------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------------


def rms_norm_reference(x, weight, eps=1e-6):
    """Plain JAX, differentiated by JAX's own autodiff: the oracle for values and gradients.

    Written as x / sqrt(...), not x * rsqrt(mean(x**2) + eps), on purpose: with jaxlib
    0.11.1 - 0.12.1, XLA:CPU miscompiles jit(grad(...)) of that rsqrt form (with x**2 or
    jnp.square) once there are >= 4096 rows: float32 gradient errors of order 1, while eager
    mode and the forward value are right (XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce
    avoids it). The x / sqrt(...) form came out right. An oracle needs checking too: main()
    compares this one with float64 NumPy at 4100 rows, and reports what the rsqrt form gives.
    """
    x32 = x.astype(jnp.float32)
    rms = jnp.sqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 / rms * weight.astype(jnp.float32)).astype(x.dtype)


def _rms_norm_reference_rsqrt(x, weight, eps=1e-6):
    """The same op in the rsqrt form, only to show the XLA:CPU issue above."""
    x32 = x.astype(jnp.float32)
    inv_rms = jax.lax.rsqrt(jnp.mean(x32**2, axis=-1, keepdims=True) + eps)
    return (x32 * inv_rms * weight.astype(jnp.float32)).astype(x.dtype)


def rms_norm_numpy(x, weight, dy, eps=1e-6):
    """Independent float64 NumPy: output, and the VJP (dx, dweight) for the cotangent dy."""
    x, w, dy = (np.asarray(v, dtype=np.float64) for v in (x, weight, dy))
    r = 1.0 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps)
    x_hat = x * r
    dy_w = dy * w
    dx = r * dy_w - x * r**3 * np.sum(dy_w * x, axis=1, keepdims=True) / x.shape[1]
    return x_hat * w, dx, np.sum(dy * x_hat, axis=0)


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

# |got - want| <= rtol * (|want| + max|want|) per element: relative to the element and to the
# array's scale (sums such as dweight and the cancellation inside dx need the second term).
# float32: 2e-6, ~17 eps, room for float32 sums over d and over rows; bfloat16: 2 ** -8, as
# the kernel rounds a float32 result once (<= 2 ** -9 relative). Comparisons with the
# reference, which rounds too, get twice that.
RTOL = {"float32": 2e-6, "bfloat16": 2.0**-8}

_failures = []


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def close_fraction(got, want, rtol):
    """The worst error as a fraction of the tolerance (<= 1 passes); inf on shape or NaN."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.isfinite(got).all():
        return np.inf
    tol = rtol * (np.abs(want) + np.abs(want).max()) + np.finfo(np.float64).tiny
    return float(np.max(np.abs(got - want) / tol))


def check_close(name, got, want, rtol):
    fraction = close_fraction(got, want, rtol)
    if np.isfinite(fraction):
        report(name, fraction <= 1.0, f"error/tolerance {fraction:.2g}, rtol {rtol:.1e}")
    else:
        report(name, False, "NaN/inf in the result, or a wrong shape")


def check_raises(name, exc_type, match, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        report(name, match in str(e), f"{exc_type.__name__}: {str(e)[:80]}")
    except Exception as e:  # a wrong exception type is a failed check, not a crash
        report(name, False, f"expected {exc_type.__name__}, got {type(e).__name__}: {e}")
    else:
        report(name, False, f"expected {exc_type.__name__}, nothing raised")


def make_case(rng, n, d, dtype, weight_dtype=None):
    """x with rows of different scales, a weight around 1, and an output cotangent."""
    scale = np.exp(rng.uniform(-3, 3, size=(n, 1)))
    x = jnp.asarray(scale * rng.standard_normal((n, d)), dtype)
    weight = jnp.asarray(1.0 + 0.5 * rng.standard_normal(d), weight_dtype or dtype)
    dy = jnp.asarray(rng.standard_normal((n, d)), dtype)
    return x, weight, dy


def value_and_vjp(fn, x, weight, dy):
    y, vjp_fn = jax.vjp(fn, x, weight)
    return (y, *vjp_fn(dy))


def check_against_oracles(tag, run, x, weight, dy, rtol, reference=True):
    """run(x, weight, dy) -> (y, dx, dw) vs float64 NumPy and, optionally, the reference."""
    got = run(x, weight, dy)
    report(
        f"{tag}: dtypes y, dx, dw",
        [v.dtype for v in got] == [x.dtype, x.dtype, weight.dtype],
        ", ".join(v.dtype.name for v in got),
    )
    for what, g, w in zip(("y", "dx", "dw"), got, rms_norm_numpy(x, weight, dy), strict=True):
        check_close(f"{tag}: {what} vs float64 numpy", g, w, rtol)
    if reference:
        want = jax.jit(functools.partial(value_and_vjp, rms_norm_reference))(x, weight, dy)
        for what, g, w in zip(("y", "dx", "dw"), got, want, strict=True):
            check_close(f"{tag}: {what} vs reference", g, w, 2 * rtol)


def check_values_and_grads(rng):
    print("-- interpret mode: values and VJPs vs plain-JAX reference and float64 NumPy")
    # Ragged: n below one block, n not a multiple of the block, d not a multiple of 128.
    cases = [(5, 128, 256), (300, 200, 128), (1000, 384, 256)]
    for dtype in (jnp.float32, jnp.bfloat16):
        for n, d, block_rows in cases:
            x, weight, dy = make_case(rng, n, d, dtype)
            tag = f"{jnp.dtype(dtype).name} ({n}, {d}) block_rows={block_rows}"
            fn = functools.partial(rms_norm, block_rows=block_rows, interpret=True)
            run = jax.jit(functools.partial(value_and_vjp, fn))
            check_against_oracles(tag, run, x, weight, dy, RTOL[jnp.dtype(dtype).name])
    x, weight, dy = make_case(rng, 100, 256, jnp.bfloat16, weight_dtype=jnp.float32)
    fn = functools.partial(rms_norm, block_rows=32, interpret=True)
    run = jax.jit(functools.partial(value_and_vjp, fn))
    check_against_oracles("bfloat16 x, float32 weight", run, x, weight, dy, RTOL["bfloat16"])


def check_oracle_at_4096_rows(rng):
    print("-- 4100 rows: the kernel, and the oracle itself, vs float64 NumPy")
    x, weight, dy = make_case(rng, 4100, 256, jnp.float32)
    _, want_dx, _ = rms_norm_numpy(x, weight, dy)
    rtol = RTOL["float32"]
    kernel = functools.partial(rms_norm, block_rows=512, interpret=True)
    run = functools.partial(value_and_vjp, kernel)
    check_against_oracles("float32 (4100, 256) kernel", run, x, weight, dy, rtol, reference=False)

    # jit(grad) with respect to x alone is where XLA:CPU went wrong (see rms_norm_reference);
    # with dweight as a second output the same rsqrt form compiled correctly.
    def jit_grad_x(fn):
        return jax.jit(jax.grad(lambda x, w, dy: jnp.sum(fn(x, w) * dy)))

    check_close("kernel, jit(grad) dx vs numpy", jit_grad_x(kernel)(x, weight, dy), want_dx, rtol)
    dx = jit_grad_x(rms_norm_reference)(x, weight, dy)
    check_close("reference (x / sqrt form), jit(grad) dx vs numpy", dx, want_dx, rtol)
    # Informational, not a check: an XLA with the fix gets the rsqrt form right too.
    fraction = close_fraction(jit_grad_x(_rms_norm_reference_rsqrt)(x, weight, dy), want_dx, rtol)
    verdict = "WRONG (the XLA:CPU issue)" if fraction > 1 else "right on this jaxlib"
    print(
        f"info x * rsqrt(mean(x**2)) form, jit(grad) dx: {verdict}, error/tolerance {fraction:.2g}"
    )


def check_strict_interpreter(rng):
    print("-- TPU interpreter: race detection, NaN for memory nobody wrote")
    # 20 rows in blocks of 8: the last block has 4 rows past the end, which read as NaN.
    x, weight, dy = make_case(rng, 20, 256, jnp.float32)
    fn = functools.partial(rms_norm, block_rows=8, interpret=STRICT_INTERPRET)
    try:
        run = functools.partial(value_and_vjp, fn)
        check_against_oracles("strict float32 (20, 256)", run, x, weight, dy, RTOL["float32"])
    except Exception as e:  # a detected race raises
        report("strict interpreter ran", False, f"{type(e).__name__}: {str(e)[:200]}")
    # The negative control: a sum over row blocks into one output block, wrongly marked
    # "parallel", is a race; the interpreter must say so (else it cannot see the real ones).
    try:
        jax.block_until_ready(_racy_row_sum(x, interpret=STRICT_INTERPRET))
        report("strict interpreter reports a race on a racy kernel", False, "no race reported")
    except Exception as e:
        report("strict interpreter reports a race on a racy kernel", "RACE" in str(e).upper())
    finally:
        pltpu.reset_tpu_interpret_mode_state()  # a raised race leaves the interpreter's state


def _racy_row_sum(x, *, interpret):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _init():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.sum(x_ref[...], axis=0, keepdims=True)

    return pl.pallas_call(
        kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((1, x.shape[1]), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((1, x.shape[1]), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),  # wrong
        interpret=interpret,
    )(x[: x.shape[0] // 8 * 8])


def lower_for_tpu(fn, *args):
    """Lower for TPU on this host (no TPU needed): the Mosaic kernel checks run here."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def check_tpu_lowering(rng):
    print("-- lowering for TPU on this host")
    for dtype in (jnp.float32, jnp.bfloat16):
        x, weight, _ = make_case(rng, 1000, 384, dtype)
        name = jnp.dtype(dtype).name
        forward = lower_for_tpu(lambda x, w: rms_norm(x, w, interpret=False), x, weight)
        report(f"{name} forward lowers to tpu_custom_call", forward.count("tpu_custom_call") == 1)
        grads = jax.value_and_grad(
            lambda x, w: jnp.sum(rms_norm(x, w, interpret=False).astype(jnp.float32)), (0, 1)
        )
        calls = lower_for_tpu(grads, x, weight).count("tpu_custom_call")
        report(f"{name} value_and_grad lowers to 2 tpu_custom_calls", calls == 2, f"{calls}")
    # vmap adds a grid axis to each kernel; the batched kernels must lower too.
    xs, weight, _ = make_case(rng, 3 * 300, 256, jnp.float32)
    batched = jax.vmap(
        jax.value_and_grad(lambda x, w: jnp.sum(rms_norm(x, w, interpret=False)), (0, 1)),
        in_axes=(0, None),
    )
    calls = lower_for_tpu(batched, xs.reshape(3, 300, 256), weight).count("tpu_custom_call")
    report("float32 vmap(value_and_grad) lowers to 2 tpu_custom_calls", calls == 2, f"{calls}")

    x, weight, dy = make_case(rng, 300, 256, jnp.float32)
    check_raises(
        "block_rows=12 refused by check_block_rows",
        ValueError,
        "must be a multiple of 8",
        rms_norm,
        x,
        weight,
        block_rows=12,
    )
    check_raises(
        "(256, 16384) float32 block, over the VMEM budget, refused",
        ValueError,
        "use block_rows <= 24",
        check_block_rows,
        256,
        (4096, 16384),
        jnp.float32,
        jnp.float32,
    )
    # Validation bypassed: interpret mode runs the bad block, TPU lowering refuses it.
    bad_forward = functools.partial(_forward_call, eps=1e-6, block_rows=12)
    y, want_y = bad_forward(x, weight, interpret=True), rms_norm_numpy(x, weight, dy)[0]
    check_close("block_rows=12, unvalidated: interpret mode runs it", y, want_y, RTOL["float32"])
    check_raises(
        "block_rows=12, unvalidated: TPU lowering refuses the forward",
        ValueError,
        "divisible by 8 and 128",
        lower_for_tpu,
        functools.partial(bad_forward, interpret=False),
        x,
        weight,
    )
    bad_backward = functools.partial(_backward_call, eps=1e-6, block_rows=12, interpret=False)
    check_raises(
        "block_rows=12, unvalidated: TPU lowering refuses the backward",
        ValueError,
        "divisible by 8 and 128",
        lower_for_tpu,
        bad_backward,
        x,
        weight,
        dy,
    )


def check_transforms(rng):
    print("-- jit, vmap, grad through the custom_vjp")
    rtol = RTOL["float32"]
    x, weight, dy = make_case(rng, 40, 128, jnp.float32)
    # interpret=None (the default): native on a TPU, interpreted here.
    fn = functools.partial(rms_norm, block_rows=16)
    want_y, want_dx, want_dw = rms_norm_numpy(x, weight, dy)
    check_close("jit: y vs numpy", jax.jit(fn)(x, weight), want_y, rtol)

    def loss(x, w):
        return jnp.sum(fn(x, w) * dy)

    dx, dw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, weight)
    check_close("jit(grad): dx vs numpy", dx, want_dx, rtol)
    check_close("jit(grad): dw vs numpy", dw, want_dw, rtol)

    # A batch of 3 inputs sharing one weight. pallas_call's batching rule adds a grid axis.
    xs = jnp.stack([x, 2.0 * x[::-1], -x])
    dys = jnp.stack([dy, dy[::-1], 0.5 * dy])
    ys = jax.jit(jax.vmap(fn, in_axes=(0, None)))(xs, weight)

    def batch_loss(xs, w):
        return jnp.sum(jax.vmap(fn, in_axes=(0, None))(xs, w) * dys)

    dxs, dw = jax.grad(batch_loss, argnums=(0, 1))(xs, weight)
    want_dw = 0
    for b in range(xs.shape[0]):
        want_y, want_dx, dw_b = rms_norm_numpy(xs[b], weight, dys[b])
        want_dw = want_dw + dw_b
        check_close(f"vmap: example {b} y vs numpy", ys[b], want_y, rtol)
        check_close(f"grad(vmap): example {b} dx vs numpy", dxs[b], want_dx, rtol)
    check_close("grad(vmap): shared dw (summed over the batch) vs numpy", dw, want_dw, rtol)

    check_raises(
        "forward mode (jvp) is refused",
        TypeError,
        "can't apply forward-mode autodiff",
        jax.jvp,
        lambda x: fn(x, weight),
        (x,),
        (x,),
    )


def check_bad_inputs(rng):
    print("-- bad inputs")
    x, weight, _ = make_case(rng, 16, 128, jnp.float32)
    bad_calls = [
        # (what, expected exception, expected message part, x, weight, keyword arguments)
        ("x rank 1", ValueError, "x must have shape (rows, features)", x[0], weight, {}),
        ("x rank 3", ValueError, "x.reshape(-1, x.shape[-1])", x[None], weight, {}),
        ("x with no rows", ValueError, "at least one row", x[:0], weight, {}),
        ("integer x", TypeError, "x must have dtype", x.astype(jnp.int32), weight, {}),
        ("float16 x", TypeError, "got float16", x.astype(jnp.float16), weight, {}),
        ("integer weight", TypeError, "weight must have dtype", x, weight.astype(int), {}),
        ("weight too long", ValueError, "weight must have shape (128,)", x, weight[:-1], {}),
        ("weight 2-D", ValueError, "weight must have shape", x, weight[None], {}),
        ("negative eps", ValueError, "eps must be", x, weight, {"eps": -1.0}),
        ("block_rows=0", ValueError, "must be a positive int", x, weight, {"block_rows": 0}),
        ("block_rows=8.0", ValueError, "must be a positive int", x, weight, {"block_rows": 8.0}),
    ]
    for name, exc_type, match, bad_x, bad_weight, kwargs in bad_calls:
        check_raises(name, exc_type, match, rms_norm, bad_x, bad_weight, **kwargs)


def main():
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__} on {jax.default_backend()}")
    check_values_and_grads(rng)
    check_oracle_at_4096_rows(rng)
    check_strict_interpreter(rng)
    check_tpu_lowering(rng)
    check_transforms(rng)
    check_bad_inputs(rng)
    print(f"\nFAILED checks: {_failures}" if _failures else "\nall checks passed")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
