"""Time the flash attention kernels: forward, and forward + backward.

    python examples/pallas/bench.py [--quick] [--block-q 128] [--block-k 128]

On a TPU: the Mosaic-compiled kernels against `jax.jit` of the plain-JAX reference (which
materialises the L x L score matrix), bfloat16, causal and not, at several sizes. Each timing
is the median of repeated calls after a warm-up, with `block_until_ready`. FLOP/s counts the
FlashAttention-2 convention: 2 (L x L x D) matmuls forward, 7 forward + backward (the
backward's S = q k^T recomputation counted once), halved when causal. The kernels do more work
than that (they recompute S and dP = dO v^T in both backward kernels), so this is the rate of
useful work.

Anywhere else the kernels can only run in Pallas interpret mode, whose speed says nothing
about a TPU: the script then checks correctness at small sizes and prints the interpret-mode
time only.
"""

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flash_attention import flash_attention
from reference import attention_reference

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/
from shared.timing import bench_arguments, median_seconds


def make_fns(attention, do):
    """jit(forward) and jit(forward + backward: value and all three input cotangents)."""

    def fwd_bwd(q, k, v):
        out, vjp = jax.vjp(attention, q, k, v)
        return out, vjp(do)

    return jax.jit(attention), jax.jit(fwd_bwd)


def inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(shape), dtype) for _ in range(4)]


def max_rel_error(got, want):
    """max |got - want| / max |want| over out, dq, dk, dv (float32 arithmetic)."""
    errors = []
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        errors.append(float(np.max(np.abs(g - w)) / np.max(np.abs(w))))
    return max(errors)


def useful_flops(shape, causal, matmuls):
    batch, heads, length, head_dim = shape
    return 2 * matmuls * batch * heads * length * length * head_dim / (2 if causal else 1)


def bench_tpu(sizes, block_q, block_k, repeats):
    dtype = jnp.bfloat16
    print(f"bfloat16, blocks (q {block_q}, k {block_k}); times in ms, median of {repeats}")
    print(
        f"{'B':>3} {'H':>3} {'L':>6} {'D':>4} {'causal':>6} | {'flash fwd':>9} {'ref fwd':>9} "
        f"{'flash f+b':>9} {'ref f+b':>9} | {'fwd TF/s':>8} {'f+b TF/s':>8} | {'rel err':>7}"
    )
    for shape in sizes:
        for causal in (False, True):
            q, k, v, do = inputs(shape, dtype)
            flash = functools.partial(
                flash_attention, causal=causal, block_q=block_q, block_k=block_k
            )
            ref = functools.partial(attention_reference, causal=causal)
            flash_fwd, flash_fb = make_fns(flash, do)
            ref_fwd, ref_fb = make_fns(ref, do)
            t_ff = median_seconds(flash_fwd, (q, k, v), repeats)
            t_fb = median_seconds(flash_fb, (q, k, v), repeats)
            try:
                t_rf = median_seconds(ref_fwd, (q, k, v), repeats)
                t_rb = median_seconds(ref_fb, (q, k, v), repeats)
                err = max_rel_error(flash_fb(q, k, v), ref_fb(q, k, v))
                ref_cols = f"{t_rf * 1e3:>9.3f} ", f"{t_rb * 1e3:>9.3f}", f"{err:>7.1e}"
            except Exception as e:  # the reference's L x L matrices may not fit in HBM
                print(f"  (reference failed: {type(e).__name__}: {str(e).splitlines()[0][:80]})")
                ref_cols = f"{'n/a':>9} ", f"{'n/a':>9}", f"{'n/a':>7}"
            fwd_tf = useful_flops(shape, causal, 2) / t_ff / 1e12
            fb_tf = useful_flops(shape, causal, 7) / t_fb / 1e12
            b, h, length, d = shape
            print(
                f"{b:>3} {h:>3} {length:>6} {d:>4} {causal!s:>6} | {t_ff * 1e3:>9.3f} "
                f"{ref_cols[0]}{t_fb * 1e3:>9.3f} {ref_cols[1]} | {fwd_tf:>8.1f} {fb_tf:>8.1f} "
                f"| {ref_cols[2]}",
                flush=True,
            )


def bench_interpret(sizes, block_q, block_k, repeats):
    print(
        "No TPU: the kernels run in Pallas INTERPRET mode (a jitted loop over the grid that "
        "emulates the kernel\nwith ordinary XLA ops). This checks correctness; its times are "
        "not a TPU performance measurement.\nfloat32; times in ms, median of "
        f"{repeats}; rel err = max |flash - reference| / max |reference| over out, dq, dk, dv"
    )
    print(
        f"{'B':>3} {'H':>3} {'L':>6} {'D':>4} {'causal':>6} | {'interp fwd':>10} "
        f"{'interp f+b':>10} | {'rel err':>7}"
    )
    for shape in sizes:
        for causal in (False, True):
            q, k, v, do = inputs(shape, jnp.float32)
            flash = functools.partial(
                flash_attention, causal=causal, block_q=block_q, block_k=block_k
            )
            flash_fwd, flash_fb = make_fns(flash, do)
            _, ref_fb = make_fns(functools.partial(attention_reference, causal=causal), do)
            err = max_rel_error(flash_fb(q, k, v), ref_fb(q, k, v))
            if not err < 1e-5:
                raise SystemExit(f"flash attention disagrees with the reference: {err:.2e}")
            t_ff = median_seconds(flash_fwd, (q, k, v), repeats)
            t_fb = median_seconds(flash_fb, (q, k, v), repeats)
            b, h, length, d = shape
            print(
                f"{b:>3} {h:>3} {length:>6} {d:>4} {causal!s:>6} | {t_ff * 1e3:>10.2f} "
                f"{t_fb * 1e3:>10.2f} | {err:>7.1e}",
                flush=True,
            )


def main():
    parser = bench_arguments(__doc__, quick="fewer sizes and repeats")
    parser.add_argument("--block-q", type=int, default=128)
    parser.add_argument("--block-k", type=int, default=128)
    args = parser.parse_args()

    platform = jax.devices()[0].platform
    print(f"jax {jax.__version__} on {platform} ({jax.devices()[0].device_kind})")
    if platform == "tpu":
        sizes = [(8, 16, 1024, 128), (4, 16, 2048, 128), (2, 16, 4096, 128), (1, 16, 8192, 128)]
        sizes, repeats = (sizes[:2], 5) if args.quick else (sizes, 20)
        bench_tpu(sizes, args.block_q, args.block_k, repeats)
    else:
        sizes = [(1, 2, 256, 64), (1, 2, 512, 64)]
        sizes, repeats = (sizes[:1], 3) if args.quick else (sizes, 5)
        bench_interpret(sizes, args.block_q, args.block_k, repeats)


if __name__ == "__main__":
    main()
