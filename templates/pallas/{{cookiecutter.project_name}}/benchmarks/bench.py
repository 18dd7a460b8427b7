"""Time the Pallas kernel against jax.jit of the plain-JAX reference. The op,
its arguments and the sizes come from the declaration, tests/op_spec.py (SPEC,
BENCH_SIZES, BENCH_SIZES_INTERPRETED and, for the roofline, bench_flops), so
this file needs no edit for another op.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg   # and draw it

On a GPU or TPU it prints median times, the ratio to XLA, and achieved
FLOP/s and bytes/s as a fraction of the device's peak (the roofline). On a CPU
the kernel can only be interpreted: it says so, checks correctness and prints
the interpret-mode time, which says nothing about hardware speed.

--plot draws time against bytes moved, per size, for the kernel and the XLA
reference, with a dashed guide: what a jitted copy of the same bytes takes at
the copy bandwidth measured here (out of cache, so small sizes can beat it; a
yardstick, not a bound): one panel for the forward pass, and one for jax.value_and_grad
when the backward is a Pallas kernel too (BACKWARD = "kernel"). It needs
matplotlib (the `bench` extra) and draws with benchmarks/plot.py.
"""

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import {{ cookiecutter.package_name }} as package
from {{ cookiecutter.package_name }} import backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import op_spec  # noqa: E402  (the declaration, beside the tests)
import plot  # noqa: E402  (benchmarks/plot.py: drawing needs matplotlib, only with --plot)
from conformance import make_args  # noqa: E402
from timing import median_seconds  # noqa: E402  (benchmarks/timing.py)


def outputs_of(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def bytes_moved(inputs, outputs):
    """Each input read once and each output written once: the least traffic."""
    return sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in (*inputs, *outputs))


def value_and_grad_of(spec, fn):
    """jax.value_and_grad of the sum of fn's differentiable outputs (in float32),
    with respect to its differentiable arguments."""
    argnums = tuple(i for i, arg in enumerate(spec.args) if arg.differentiable)

    def loss(*inputs):
        outputs = outputs_of(fn(*inputs))
        chosen = spec.differentiable_outputs
        if chosen is None:
            chosen = [i for i, o in enumerate(outputs) if jnp.issubdtype(o.dtype, jnp.floating)]
        return sum(jnp.sum(outputs[i].astype(jnp.float32)) for i in chosen)

    return jax.value_and_grad(loss, argnums=argnums)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--plot", metavar="FILE.svg", help="draw the times (needs matplotlib)")
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()  # now, not after minutes of measuring
    spec = op_spec.SPEC
    device = jax.devices()[0]
    native = device.platform in ("gpu", "tpu")
    if native:
        sizes = getattr(op_spec, "BENCH_SIZES", [dict(spec.sizes)])
    else:
        sizes = getattr(op_spec, "BENCH_SIZES_INTERPRETED", [dict(spec.sizes)])
        print(
            f"{device.platform}: measuring INTERPRET mode ({backend.BACKEND} kernel on the CPU):"
            " correctness and interpreter time only, not hardware speed"
        )
    sizes = sizes[:1] if args.quick else sizes
    repeats = 3 if (args.quick or not native) else args.repeats
    peak = plot.peak(device)  # (FLOP/s, bytes/s), or None: a CPU, or a chip not in plot.PEAKS
    flops_of = getattr(op_spec, "bench_flops", None)
    dtype = "bfloat16" if native else "float32"
    print(f"jax {jax.__version__}, {device.device_kind}, {backend.BACKEND} backend, {dtype}")

    pallas = jax.jit(spec.op)
    xla = jax.jit(spec.reference)
    # The backward is timed (value_and_grad) when it is a Pallas kernel too.
    grads = getattr(package, "BACKWARD", "reference") == "kernel" and any(
        arg.differentiable for arg in spec.args
    )
    if grads:
        pallas_grad = jax.jit(value_and_grad_of(spec, spec.op))
        xla_grad = jax.jit(value_and_grad_of(spec, spec.reference))
    # For the plot, per pass: bytes moved and the times of pallas and XLA.
    drawn = {"forward": ([], [], []), "value_and_grad": ([], [], [])}
    rng = np.random.default_rng(0)
    for size in sizes:
        inputs = make_args(dataclasses.replace(spec, sizes=size), rng, dtype)
        got, want = outputs_of(pallas(*inputs)), outputs_of(xla(*inputs))
        error = max(
            float(jnp.max(jnp.abs(g.astype(jnp.float32) - w.astype(jnp.float32))))
            for g, w in zip(got, want, strict=True)
        )
        (t_pallas,) = median_seconds([pallas], inputs, repeats)
        label = ", ".join(f"{axis}={n}" for axis, n in size.items())
        line = f"{label}: pallas {1e3 * t_pallas:9.3f} ms, max |error| {error:.2e}"
        moved = bytes_moved(inputs, want)
        t_xla = median_seconds([xla], inputs, repeats)[0] if (native or args.plot) else None
        if native:
            line += f", XLA {1e3 * t_xla:9.3f} ms, pallas/XLA time {t_pallas / t_xla:5.2f}x"
            if peak and flops_of is not None:
                flops = flops_of(size)
                line += (
                    f", {flops / t_pallas / 1e12:6.1f} TFLOP/s ({flops / t_pallas / peak[0]:.0%}"
                    " of peak)"
                )
            if peak:
                line += f", {moved / t_pallas / 1e9:7.1f} GB/s ({moved / t_pallas / peak[1]:.0%})"
        print(line)
        if args.plot:
            for column, value in zip(drawn["forward"], (moved, t_pallas, t_xla), strict=True):
                column.append(value)
        if grads and (native or args.plot):
            _, gradients = pallas_grad(*inputs)
            (t_pallas,) = median_seconds([pallas_grad], inputs, repeats)
            (t_xla,) = median_seconds([xla_grad], inputs, repeats)
            # The forward's traffic, then the backward's: read the output
            # cotangents (and the inputs again), write the gradients.
            moved = 2 * moved + bytes_moved(gradients, ())
            measured = (moved, t_pallas, t_xla)
            for column, value in zip(drawn["value_and_grad"], measured, strict=True):
                column.append(value)
            print(
                f"{label}: value_and_grad: pallas {1e3 * t_pallas:9.3f} ms,"
                f" XLA {1e3 * t_xla:9.3f} ms, pallas/XLA time {t_pallas / t_xla:5.2f}x"
            )
    if native and not peak:
        print(f"(no peak figures for {device.device_kind!r}: add them to plot.PEAKS)")
    if args.plot:
        draw(args.plot, drawn, native, args.quick)


XLABELS = {
    "forward": "bytes moved (MB: inputs read, outputs written)",
    "value_and_grad": "bytes moved (MB: forward, then inputs and cotangents read, grads written)",
}


def draw(path, drawn, native, quick):
    """One panel per pass measured: time against bytes moved, with a copy of
    the same bytes at the copy bandwidth measured on this device, dashed."""
    bandwidth = plot.copy_bandwidth(megabytes=8, repeats=5) if quick else plot.copy_bandwidth()
    where = "" if native else " (interpreted on the CPU)"
    panels = []
    for name, (moved, t_pallas, t_xla) in drawn.items():
        if not moved:
            continue
        megabytes = [b / 1e6 for b in moved]
        panels.append(
            plot.Panel(
                title=f"{name}: {backend.BACKEND} Pallas kernel{where} vs XLA",
                xlabel=XLABELS[name],
                ylabel="median time (ms)",
                series={
                    f"Pallas ({backend.BACKEND}{', interpret mode' if not native else ''})": (
                        megabytes,
                        [1e3 * t for t in t_pallas],
                    ),
                    "XLA (jax.jit of the reference)": (megabytes, [1e3 * t for t in t_xla]),
                },
                guides={
                    f"copy of the same bytes ({bandwidth / 1e9:.3g} GB/s)": (
                        megabytes,
                        [1e3 * b / bandwidth for b in moved],
                    )
                },
            )
        )
    note = plot.machine()
    if not native:
        note += (
            "; the Pallas kernel ran in INTERPRET mode on the CPU: its time says nothing"
            " about a compiled kernel's"
        )
    plot.write_plot(path, panels, note=note)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
