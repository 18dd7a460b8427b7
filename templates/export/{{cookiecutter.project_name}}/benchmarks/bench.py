{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Call time of the deserialized artifact, through Artifact.__call__ (its
input checks included), against jax.jit of the original model; plus the
artifact's size and time to deserialize, and the time to a first result.

    python benchmarks/bench.py                # default sizes
    python benchmarks/bench.py --quick        # one small size, for CI smoke runs
    python benchmarks/bench.py --repeats 400  # more rounds: a steadier median
    python benchmarks/bench.py --plot docs/benchmark.svg  # and draw it (matplotlib)

The two sides are timed in the same run, interleaved: each round times a few
calls of one side, then of the other (the order alternating between rounds),
so that a load that comes and goes on the machine hits both alike. The ratio is
the median over rounds of each round's artifact / jit time.

The time to a first result is what a fresh process pays before its first
answer: load the artifact (read, verify, deserialize) and call it once (which
compiles its StableHLO), against jax.jit of the model called once (trace,
lower, compile), in CPU time. Each is the median of a few fresh starts per size.

Both sides run on this machine's default device: the benchmark exports its own
artifact for the project's platforms and this one's, so that on a TPU host it
times the artifact on the TPU even if the project ships a CPU-only one. Where
the chip's peak is known (benchmarks/plot.py PEAKS: a TPU or a GPU, not a
CPU), the artifact's FLOP/s (XLA's count for the compiled model, so no count
to keep in step with the model) and bytes moved per second (weights, inputs
and outputs) are printed as a share of the chip's peak.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from jax import export

from {{ cookiecutter.package_name }} import artifact, init_params
from {{ cookiecutter.package_name }}.{{ cookiecutter.op_name }} import exported_function

import plot  # benchmarks/plot.py, beside this file

# Each timed sample repeats the call until it lasts about this long, so that
# the timer's own cost does not count for small inputs.
SAMPLE_SECONDS = 1e-3


def compiled_flops(fn, *args):
    """The FLOPs XLA counts in fn compiled for these arguments (its cost
    analysis), or None where the backend gives none: no count to keep in step
    with the model by hand."""
    try:
        cost = fn.lower(*args).compile().cost_analysis()
    except (NotImplementedError, RuntimeError):  # a backend without cost analysis
        return None
    cost = cost[0] if isinstance(cost, list) else cost  # JAX 0.10: one dict per program
    flops = (cost or {}).get("flops")
    return float(flops) if flops and flops > 0 else None


def nbytes(tree):
    """Bytes of the arrays (or shape-dtype structs) in tree."""
    leaves = jax.tree.leaves(tree)
    return sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in leaves)


def seconds_per_call(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / calls


def compare(artifact_call, jit_call, rounds):
    """Median seconds per call of each side, and the median of the rounds' ratios."""
    for fn in (artifact_call, jit_call):  # warm-up: compile, check, first run
        seconds_per_call(fn, 3)
    calls = max(1, round(SAMPLE_SECONDS / seconds_per_call(jit_call, 10)))
    times, ratios = ([], []), []
    for i in range(rounds):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        sample = [0.0, 0.0]
        for side in order:
            sample[side] = seconds_per_call((artifact_call, jit_call)[side], calls)
            times[side].append(sample[side])
        ratios.append(sample[0] / sample[1])
    return statistics.median(times[0]), statistics.median(times[1]), ratios


def first_result(path, params, inputs, starts):
    """Median CPU seconds from nothing compiled to a first result, per side: a
    fresh load of the artifact and a fresh jax.jit of the model, each called
    once. CPU time (this process's, all threads), not wall time: compiling is
    long enough for other work on a shared machine to inflate a wall clock."""
    times = ([], [])
    for _ in range(starts):
        start = time.process_time()
        jax.block_until_ready(artifact.load(path)(*inputs))
        times[0].append(time.process_time() - start)
        # A new function each time: jax.jit traces and compiles it anew.
        fresh = jax.jit(lambda params, *inputs: exported_function(params)(*inputs))
        start = time.process_time()
        jax.block_until_ready(fresh(params, *inputs))
        times[1].append(time.process_time() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 20 rounds")
    parser.add_argument("--repeats", type=int, default=200, help="rounds per size")
    parser.add_argument("--plot", metavar="FILE.svg", help="also draw the results (matplotlib)")
    args = parser.parse_args()
    if args.plot:
        plot.require_matplotlib()  # now, not after minutes of measuring
    rounds = 20 if args.quick else args.repeats
    starts = 1 if args.quick else 3  # fresh starts per size, for the time to a first result
    # The batch grows; {% if seq %}the sequence length stays at its largest (s <= 128).{% else %}the artifact's one symbolic dimension.{% endif %}
    sizes = {% if seq %}[(8, 16)] if args.quick else [(1, 128), (8, 128), (64, 128), (512, 128)]{% else %}[(8,)] if args.quick else [(8,), (128,), (1024,), (8192,), (65536,)]{% endif %}

    with tempfile.TemporaryDirectory() as tmp:
        # The project's platforms and this machine's: the artifact runs where jit does.
        platforms = tuple(dict.fromkeys((*artifact.PLATFORMS, export.default_export_platform())))
        path = artifact.save(artifact.export_model(platforms=platforms), Path(tmp) / "model.jax")
        blob = path.read_bytes()
        loaded = artifact.load(path)
        start = time.perf_counter()
        for _ in range(5):
            export.deserialize(bytearray(blob))
        deserialize_ms = 1e3 * (time.perf_counter() - start) / 5

        # Where the artifact runs: the default device, whose platform it was
        # exported for above (choose_device, as a user's code picks one). Both
        # sides run there.
        device = artifact.choose_device(loaded.exported.platforms, artifact.available_devices())
        chip = plot.peak(device)  # (FLOP/s, bytes/s), or None: not known (a CPU)
        print(
            f"jax {jax.__version__} on {device.platform} ({device.device_kind}); "
            f"{rounds} interleaved rounds per size"
        )
        print(
            f"artifact: {len(blob)} bytes, platforms {', '.join(loaded.exported.platforms)}, "
            f"deserialize {deserialize_ms:.2f} ms"
        )
        # What the artifact replaces: the model's own function, jitted, its weights
        # passed as arguments.
        original = jax.jit(lambda params, *inputs: exported_function(params)(*inputs))
        params = jax.device_put(init_params(), device)
        print(
            f"{'sizes':>12} {'artifact ms':>12} {'jit ms':>9} {'ratio':>7} {'ratio q1-q3':>12}"
            f" {'FLOP/s share':>13} {'B/s share':>10}"
            f" {'first result: artifact CPU ms':>30} {'jit CPU ms':>11}"
        )
        rows = []
        for size in sizes:
            inputs = artifact.random_inputs(loaded.metadata, {% if seq %}batch=size[0], seq=size[1]{% else %}batch=size[0]{% endif %}, seed=0)
            # On the device already, so that both sides time the call, not a copy.
            inputs = [jax.device_put(x, device) for x in inputs.values()]
            t_artifact, t_original, ratios = compare(
                lambda inputs=inputs: loaded(*inputs),
                lambda inputs=inputs: original(params, *inputs),
                rounds,
            )
            first = first_result(path, params, inputs, starts)
            rows.append((size, t_artifact, t_original, *first))
            q1, _, q3 = statistics.quantiles(ratios)
            # The least a call moves: the weights and inputs read, the outputs written.
            outputs = jax.eval_shape(original, params, *inputs)
            moved = nbytes(params) + nbytes(inputs) + nbytes(outputs)
            flops = compiled_flops(original, params, *inputs)
            print(
                f"{str(size):>12} {1e3 * t_artifact:>12.3f} {1e3 * t_original:>9.3f} "
                f"{statistics.median(ratios):>6.2f}x {q1:>6.2f}-{q3:.2f}"
                f" {plot.share(flops, t_artifact, chip and chip[0]):>13}"
                f" {plot.share(moved, t_artifact, chip and chip[1]):>10}"
                f" {1e3 * first[0]:>30.1f} {1e3 * first[1]:>11.1f}"
            )
    print("ratio: artifact / jit, per round (1.00x: the artifact costs nothing extra per call)")
    print("first result: CPU ms of a fresh load + first call, against a fresh jax.jit + first call")
    print(
        "FLOP/s, B/s share: the model's FLOPs (XLA's cost analysis) and least bytes moved (weights,"
        " inputs, outputs) per second, as a share of the chip's peak"
    )
    print(plot.peak_note(device))
    if args.plot:
        draw(args.plot, rows, len(blob))
        print(f"plot: {args.plot}")


def draw(path, rows, size_bytes):
    """Two panels against the batch size: the time per call, and the time
    from nothing compiled to a first result."""
    batches = [size[0] for size, *_ in rows]
    ms = [[1e3 * row[i] for row in rows] for i in range(1, 5)]
    xlabel = "batch (rows{% if seq %}, each of s tokens{% endif %})"
    {%- if seq %}
    seqs = sorted({size[1] for size, *_ in rows})
    where = f", s = {', '.join(map(str, seqs))}"
    {%- else %}
    where = ""
    {%- endif %}
    panels = [
        plot.Panel(
            f"Time per call{where}",
            xlabel,
            "milliseconds per call (median)",
            series={
                "artifact (deserialized, inputs checked)": (batches, ms[0]),
                "jax.jit of the model": (batches, ms[1]),
            },
        ),
        plot.Panel(
            f"Time to a first result ({size_bytes:,} byte artifact)",
            xlabel,
            "CPU milliseconds, nothing compiled before",
            series={
                "load artifact + first call": (batches, ms[2]),
                "jax.jit of the model + first call": (batches, ms[3]),
            },
        ),
    ]
    plot.write_plot(path, panels, note=plot.machine())


if __name__ == "__main__":
    main()
