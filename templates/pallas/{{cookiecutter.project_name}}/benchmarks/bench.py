"""Time the Pallas kernel against jax.jit of the plain-JAX reference.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs

On a GPU or TPU it prints median times, the ratio to XLA, and achieved
FLOP/s and bytes/s as a fraction of the device's peak (the roofline). On a CPU
the kernel can only be interpreted: it says so, checks correctness and prints
the interpret-mode time, which says nothing about hardware speed.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from {{ cookiecutter.package_name }} import kernel

# isort: split
from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }}, {{ cookiecutter.op_name }}_reference

# Dense bf16 peak (FLOP/s) and HBM bandwidth (bytes/s), by device_kind substring.
PEAKS = {
    "TPU v4": (275e12, 1.2e12),
    "TPU v5 lite": (197e12, 0.82e12),
    "TPU v5e": (197e12, 0.82e12),
    "TPU v5p": (459e12, 2.76e12),
    "TPU v6": (918e12, 1.64e12),
    "H200": (989e12, 4.8e12),
    "H100": (989e12, 3.35e12),
    "A100": (312e12, 2.0e12),
}


def median_seconds(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def operands(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)
    return (
        a,
        jnp.asarray(rng.standard_normal((k, n)), dtype),
        jnp.asarray(rng.standard_normal(n), dtype),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    device = jax.devices()[0]
    native = device.platform in ("gpu", "tpu")
    sizes = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192)]
    if not native:
        sizes = [(256, 256, 256)] if args.quick else [(256, 256, 256), (512, 512, 512)]
        print(
            f"{device.platform}: measuring INTERPRET mode ({kernel.BACKEND} kernel on the CPU):"
            " correctness and interpreter time only, not hardware speed"
        )
    elif args.quick:
        sizes = sizes[:1]
    repeats = 3 if (args.quick or not native) else args.repeats
    peak = next((p for name, p in PEAKS.items() if name in device.device_kind), None)
    dtype = jnp.bfloat16 if native else jnp.float32
    print(
        f"jax {jax.__version__}, {device.device_kind}, {kernel.BACKEND} backend, {dtype.__name__}"
    )

    pallas = jax.jit(lambda a, b, bias: {{ cookiecutter.op_name }}(a, b, bias, implementation="kernel"))
    xla = jax.jit({{ cookiecutter.op_name }}_reference)
    for m, k, n in sizes:
        args_ = operands(m, k, n, dtype)
        got, want = pallas(*args_), xla(*args_)
        error = float(jnp.max(jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32))))
        t_pallas = median_seconds(pallas, args_, repeats)
        line = f"{m}x{k}x{n}: pallas {1e3 * t_pallas:9.3f} ms, max |error| {error:.2e}"
        if native:
            t_xla = median_seconds(xla, args_, repeats)
            flops = 2 * m * n * k
            bytes_moved = (m * k + k * n + m * n) * jnp.dtype(dtype).itemsize
            line += f", XLA {1e3 * t_xla:9.3f} ms, pallas/XLA time {t_pallas / t_xla:5.2f}x"
            if peak:
                line += (
                    f", {flops / t_pallas / 1e12:6.1f} TFLOP/s ({flops / t_pallas / peak[0]:.0%}"
                    f" of peak), {bytes_moved / t_pallas / 1e9:7.1f} GB/s"
                    f" ({bytes_moved / t_pallas / peak[1]:.0%})"
                )
        print(line)
    if native and not peak:
        print(f"(no peak figures for {device.device_kind!r}: add them to PEAKS for the roofline)")


if __name__ == "__main__":
    main()
