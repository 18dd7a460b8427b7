"""Time the FFI handler against jax.jit of the plain-JAX reference, forward and
forward+backward, and the FFI handler's bandwidth against a memory copy.
Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes, float32
    python benchmarks/bench.py --quick    # a small size, for CI smoke runs

Both sides run the same way: jitted, on arrays already on the device, after
a warm-up call, timed with block_until_ready. The two are timed in alternation
so that drift on a shared machine hits both alike; the median is reported.
Freeing each result happens outside the timed region: XLA runs a program
with no counted FLOPs (one FFI call) inline on the Python thread and frees
its results there, but frees the reference's on a worker thread, so timing
the frees would charge the FFI side alone.

Bandwidth: the bytes the op must move at least (read x, write y; the
backward also reads x and the cotangent and writes dx) over its time, as a
fraction of a NumPy copy of the same size into memory already in use (one
thread, no page faults): about what this machine's memory can stream. RMS
normalisation is memory-bound, so that fraction, not FLOPs, says how much is
left to gain; page faults on fresh output are part of what is left.

On a CPU much of the time for 64 MB of fresh output is the kernel's page
faults, for both sides (the handler pre-faults its output, see
csrc/rms_norm_parallel.h). GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (transparent
huge pages for large allocations, on Linux with glibc) removes most of them
and shows the compute difference better.
"""

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from {{ cookiecutter.package_name }} import rms_norm, rms_norm_reference


def forward_and_backward(f):
    """y and the VJP of a cotangent g: what one training step asks of the op."""

    def run(x, g):
        y, vjp = jax.vjp(f, x)
        return y, vjp(g)[0]

    return jax.jit(run)


def median_seconds(fns, args, repeats):
    """Median time of each fn, timed in alternation."""
    for fn in fns:
        jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t in zip(fns, times, strict=True):
            start = time.perf_counter()
            result = jax.block_until_ready(fn(*args))
            t.append(time.perf_counter() - start)
            del result  # freed outside the timed region (see the module docstring)
            time.sleep(0.005)  # let a worker thread finish freeing it, too
    return [statistics.median(t) for t in times]


def copy_bandwidth(nbytes, repeats):
    """Bytes per second of a NumPy copy (read + write) into touched memory."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)  # written once here, so the timed copies take no page faults
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return 2 * nbytes / statistics.median(times)


def max_error(got, want):
    got = [np.asarray(v, np.float64) for v in jax.tree.leaves(got)]
    want = [np.asarray(v, np.float64) for v in jax.tree.leaves(want)]
    return max(float(np.max(np.abs(a - b))) for a, b in zip(got, want, strict=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    args = parser.parse_args()
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    sizes = [(512, 512)] if args.quick else [(4096, 4096), (65536, 256), (256, 65536)]
    repeats = 3 if args.quick else args.repeats
    dtype = jnp.dtype(args.dtype)

    device = jax.devices()[0]
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    print(
        f"jax {jax.__version__} on {device.platform} ({os.cpu_count()} CPUs), {dtype.name}, "
        f"median of {repeats} runs" + (f", GLIBC_TUNABLES={tunables}" if tunables else "")
    )
    print(
        f"{'rows x cols':>12} {'pass':>9} {'ffi ms':>9} {'reference ms':>13} {'speed-up':>9} "
        f"{'ffi GB/s':>9} {'of copy':>8} {'max |diff|':>11}"
    )
    rng = np.random.default_rng(0)
    for rows, cols in sizes:
        nbytes = rows * cols * dtype.itemsize
        copy = copy_bandwidth(nbytes, repeats)
        x = jnp.asarray(rng.standard_normal((rows, cols)), dtype)
        g = jnp.asarray(rng.standard_normal((rows, cols)), dtype)
        cases = [
            ("forward", jax.jit(rms_norm), jax.jit(rms_norm_reference), (x,), 2 * nbytes),
            (
                "fwd+bwd",
                forward_and_backward(rms_norm),
                forward_and_backward(rms_norm_reference),
                (x, g),
                5 * nbytes,
            ),
        ]
        for name, ffi, reference, operands, moved in cases:
            error = max_error(ffi(*operands), reference(*operands))
            t_ffi, t_reference = median_seconds([ffi, reference], operands, repeats)
            print(
                f"{f'{rows} x {cols}':>12} {name:>9} {1e3 * t_ffi:>9.2f} "
                f"{1e3 * t_reference:>13.2f} {t_reference / t_ffi:>8.2f}x "
                f"{moved / t_ffi / 1e9:>9.1f} {moved / t_ffi / copy:>7.0%} {error:>11.2e}"
            )
        print(f"{'':>12} {'copy':>9} {'':>33} {copy / 1e9:>9.1f} (NumPy copy, 1 thread)")
    print("speed-up: reference time / FFI time (above 1 means the FFI handler is faster)")


if __name__ == "__main__":
    main()
