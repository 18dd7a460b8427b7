"""Time, temporary memory and bytes communicated per training step: the
shard_map step against the same step unsharded (one device) and auto-sharded
(`jax.jit` given only the input and output shardings, the partitioner picks
the collectives). Speed goals live here, never in tests.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs
    python benchmarks/bench.py --plot docs/benchmark.svg   # and draw the remat trade

On simulated CPU devices the devices share the host's cores, so times there
say little; memory and bytes are per device and hold on any platform.

--plot draws the trade the remat option makes: the training step's
temporary and peak memory per device (`compiled.memory_analysis()`, so
compiled, never run) against the batch, for each checkpoint policy
(regather, save-gathered), for no checkpointing, and for the unsharded
reference step on one device.

Where the chip's peak is known (benchmarks/plot.py PEAKS: a TPU or a GPU, not
a CPU), each version's FLOP/s (step_flops) is printed as a share of the peak
of the devices it runs on: the mesh's for the sharded steps, one for the
unsharded one.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import jax

# Simulate 8 devices on a CPU-only host; this must run before the backend
# starts, and does nothing to GPU or TPU devices.
jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402

from {{ cookiecutter.package_name }} import (  # noqa: E402
    make_mesh,
    reference_step,
    shard_batch,
    shard_params,
    train_step,
)
from {{ cookiecutter.package_name }}.hlo import collective_bytes  # noqa: E402
from {{ cookiecutter.package_name }}.sharded_step import (  # noqa: E402
    BATCH_SPEC,
    POLICIES,
    REMAT,
    SPECS,
    WEIGHTS,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot  # noqa: E402  (benchmarks/plot.py: matplotlib only when drawing)

# The plot's sweep: (layers, d, f) fixed, the batch growing, so that the
# weights dominate the memory at the left and the activations at the right.
PLOT_SHAPE = (4, 256, 1024)
PLOT_BATCHES = [64, 256, 1024, 4096, 16384]
QUICK_PLOT_SHAPE = (4, 64, 256)
QUICK_PLOT_BATCHES = [512]


def step_flops(layers, batch, d, f):
    """The FLOPs of one training step, for the share of the chip's peak: each
    weight entry meets each row in one multiply-add (2 FLOPs) forward and two
    backward (the activations' and the weight's gradients), 6 per row in all;
    the elementwise work, the update and remat's recomputation are left out.
    True of any block whose weights each enter one matmul with the activations."""
    entries = sum(int(np.prod([d if a == "d" else f for a in axes])) for axes in WEIGHTS.values())
    return 6 * batch * layers * entries


def problem(layers, batch, d, f):
    """Host (NumPy) arrays: each version places its own copy, since every
    step donates, and so deletes, the parameters it is given. Every axis of
    a weight but d is f long."""
    rng = np.random.default_rng(0)

    def weight(axes):
        shape = tuple(d if a == "d" else f for a in axes)
        w = rng.standard_normal(shape)
        return (w / np.sqrt(shape[0]) if len(shape) > 1 else w).astype(np.float32)

    params = [tuple(weight(axes) for axes in WEIGHTS.values()) for _ in range(layers)]
    x = rng.standard_normal((batch, d)).astype(np.float32)
    return params, x, np.ascontiguousarray(x[:, ::-1])


def measure(step, params, momentum, x, y, repeats):
    """(median seconds, temp bytes, collective bytes) of one step; the step
    donates params and momentum, so each call feeds on the last one's output."""
    compiled = step.lower(params, momentum, x, y).compile()
    memory = compiled.memory_analysis().temp_size_in_bytes
    moved = collective_bytes(compiled.as_text())
    params, momentum, _ = step(params, momentum, x, y)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        params, momentum, loss = step(params, momentum, x, y)
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - start)
    return statistics.median(times), memory, moved


def on_device(tree):
    return jax.tree.map(jnp.asarray, tree)


def zeros_like(params):
    return jax.tree.map(np.zeros_like, params)


def memory(step, *args, **static):
    """(temporary, peak) bytes per device of `step` compiled for `args`. Peak
    is what a device holds while the step runs: its arguments, its outputs
    but those written into donated arguments, and its temporaries. (XLA:CPU's
    own `peak_memory_in_bytes` leaves the temporaries out.)"""
    stats = step.lower(*args, **static).compile().memory_analysis()
    temp = stats.temp_size_in_bytes
    peak = stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes
    return temp, peak + temp


def memory_sweep(mesh, layers, d, f, batches):
    """{version: [(temp, peak) per batch]}: train_step under each checkpoint
    policy and under none, and the unsharded reference step, on abstract
    arrays (compiled, not run: nothing is allocated)."""
    versions = {f"remat={remat}": remat for remat in POLICIES} | {"no remat": None}
    found = {name: [] for name in [*versions, "unsharded"]}
    for batch in batches:
        params, x, y = problem(layers, batch, d, f)
        with jax.set_mesh(mesh):
            p, m = shard_params(on_device(params)), shard_params(on_device(zeros_like(params)))
            xs, ys = shard_batch(on_device(x)), shard_batch(on_device(y))
            for name, remat in versions.items():
                found[name].append(memory(train_step, p, m, xs, ys, remat=remat))
        one = jax.jit(reference_step, donate_argnums=(0, 1))
        found["unsharded"].append(memory(one, *on_device((params, zeros_like(params), x, y))))
    return found


def draw(path, mesh, layers, d, f, batches):
    found = memory_sweep(mesh, layers, d, f, batches)
    print(f"plot: (layers, d, f) = {(layers, d, f)}, batches {batches}")
    print(f"{'version':>20} " + " ".join(f"{b:>22}" for b in batches))
    for name, rows in found.items():
        cells = " ".join(f"{f'{t:,} / {p:,}':>22}" for t, p in rows)
        print(f"{name:>20} {cells}")
    print("cells: temp / peak bytes per device")
    where = f"{len(mesh.devices.flat)} devices, mesh {dict(mesh.shape)}"
    setting = f"{layers} blocks, d = {d}, f = {f}"
    panels = [
        plot.Panel(
            title=f"{label} memory of one training step\n({setting}; {where})",
            xlabel="batch (rows)",
            ylabel=f"{label.lower()} bytes per device",
            series={name: (batches, [row[i] for row in rows]) for name, rows in found.items()},
        )
        for i, label in enumerate(["Temporary", "Peak"])
    ]
    plot.write_plot(path, panels, note=plot.machine())
    print(f"plot written to {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--plot", metavar="FILE.svg", help="draw memory against batch per policy")
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()
    sizes = [(4, 512, 64, 256)] if args.quick else [(4, 512, 64, 256), (4, 2048, 256, 1024)]
    repeats = 3 if args.quick else args.repeats
    mesh = make_mesh()
    # The same layout with Auto axes, for jit's partitioner to work from.
    auto_mesh = jax.make_mesh(
        tuple(mesh.shape.values()),
        mesh.axis_names,
        axis_types=(AxisType.Auto,) * len(mesh.axis_names),
    )
    print(
        f"jax {jax.__version__}, {len(jax.devices())} {jax.default_backend()} devices, "
        f"mesh {dict(mesh.shape)}, remat {REMAT}"
    )
    chip = plot.peak()  # (FLOP/s, bytes/s) of one device, or None: not known (a CPU)
    on_mesh = len(mesh.devices.flat)
    print(
        f"{'(layers, batch, d, f)':>22} {'version':>12} {'median ms':>10} {'temp bytes':>12} "
        f"{'comm bytes':>12} {'time ratio':>11} {'temp ratio':>11} {'comm ratio':>11} "
        f"{'FLOP/s share':>13}"
    )
    for size in sizes:
        params, x, y = problem(*size)
        rows = {}
        with jax.set_mesh(mesh):
            p, m = shard_params(on_device(params)), shard_params(on_device(zeros_like(params)))
            xs, ys = shard_batch(on_device(x)), shard_batch(on_device(y))
            rows["shard_map"] = measure(train_step, p, m, xs, ys, repeats)
        one = jax.jit(reference_step, donate_argnums=(0, 1))
        rows["unsharded"] = measure(one, *on_device((params, zeros_like(params), x, y)), repeats)
        specs = [tuple(NamedSharding(auto_mesh, spec) for spec in SPECS)] * size[0]
        batch = NamedSharding(auto_mesh, BATCH_SPEC)
        auto = jax.jit(
            reference_step,
            in_shardings=(specs, specs, batch, batch),
            out_shardings=(specs, specs, NamedSharding(auto_mesh, jax.P())),
            donate_argnums=(0, 1),
        )
        placed = jax.device_put((params, zeros_like(params), x, y), (specs, specs, batch, batch))
        rows["auto jit"] = measure(auto, *placed, repeats)
        base_time, base_temp, base_comm = rows["shard_map"]
        for name, (seconds, temp, comm) in rows.items():
            # A ratio to nothing is "-": XLA:TPU may need no temporary buffer at all.
            comm_ratio = f"{comm / base_comm:.2f}" if base_comm else "-"
            temp_ratio = f"{temp / base_temp:.2f}" if base_temp else "-"
            devices = 1 if name == "unsharded" else on_mesh
            flop_share = plot.share(step_flops(*size), seconds, chip and devices * chip[0])
            print(
                f"{str(size):>22} {name:>12} {1e3 * seconds:>10.3f} {temp:>12,} {comm:>12,} "
                f"{seconds / base_time:>11.2f} {temp_ratio:>11} {comm_ratio:>11} "
                f"{flop_share:>13}"
            )
        speed_up = rows["unsharded"][0] / base_time
        print(
            f"{str(size):>22} speed of the shard_map step / the plain reference step's: "
            f"{speed_up:.2f}x ({on_mesh} device(s) against 1)"
        )
    print("temp: compiled.memory_analysis().temp_size_in_bytes, per device")
    print("comm: per-device result bytes of every collective in the compiled program")
    print("ratios: this version / the shard_map step")
    print(
        "FLOP/s share: the step's FLOPs (step_flops) per second, as a share of the peak of"
        f" the devices it runs on ({on_mesh} for the mesh, 1 unsharded)"
    )
    print(plot.peak_note())
    if args.plot:
        shape, batches = (
            (QUICK_PLOT_SHAPE, QUICK_PLOT_BATCHES) if args.quick else (PLOT_SHAPE, PLOT_BATCHES)
        )
        draw(args.plot, mesh, *shape, batches)


if __name__ == "__main__":
    main()
