{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Call time of the deserialized artifact, through Artifact.__call__ (its
input checks included), against jax.jit of the original model; plus the
artifact's size and time to deserialize.

    python benchmarks/bench.py                # default sizes
    python benchmarks/bench.py --quick        # one small size, for CI smoke runs
    python benchmarks/bench.py --repeats 400  # more rounds: a steadier median

The two sides are timed in the same run, interleaved: each round times a few
calls of one side, then of the other (the order alternating between rounds),
so that a load that comes and goes on the machine hits both alike. The ratio is
the median over rounds of each round's artifact / jit time.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import jax
from jax import export

from {{ cookiecutter.package_name }} import artifact, init_params
from {{ cookiecutter.package_name }}.{{ cookiecutter.op_name }} import exported_function

# Each timed sample repeats the call until it lasts about this long, so that
# the timer's own cost does not count for small inputs.
SAMPLE_SECONDS = 1e-3


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 20 rounds")
    parser.add_argument("--repeats", type=int, default=200, help="rounds per size")
    args = parser.parse_args()
    rounds = 20 if args.quick else args.repeats
    sizes = {% if seq %}[(8, 16)] if args.quick else [(8, 16), (64, 128), (512, 128)]{% else %}[(8,)] if args.quick else [(8,), (1024,), (65536,)]{% endif %}

    with tempfile.TemporaryDirectory() as tmp:
        path = artifact.save(artifact.export_model(), Path(tmp) / "model.jax")
        blob = path.read_bytes()
        loaded = artifact.load(path)
        start = time.perf_counter()
        for _ in range(5):
            export.deserialize(bytearray(blob))
        deserialize_ms = 1e3 * (time.perf_counter() - start) / 5

    platform = jax.devices()[0].platform
    print(f"jax {jax.__version__} on {platform}; {rounds} interleaved rounds per size")
    print(
        f"artifact: {len(blob)} bytes, platforms {', '.join(artifact.PLATFORMS)}, "
        f"deserialize {deserialize_ms:.2f} ms"
    )
    # What the artifact replaces: the model's own function, jitted, its weights
    # passed as arguments.
    original = jax.jit(lambda params, *inputs: exported_function(params)(*inputs))
    params = init_params()
    print(f"{'sizes':>12} {'artifact ms':>12} {'jit ms':>9} {'ratio':>7} {'ratio q1-q3':>12}")
    for size in sizes:
        inputs = artifact.random_inputs(loaded.metadata, {% if seq %}batch=size[0], seq=size[1]{% else %}batch=size[0]{% endif %}, seed=0)
        # On the device already, so that both sides time the call, not a copy.
        inputs = [jax.device_put(x) for x in inputs.values()]
        t_artifact, t_original, ratios = compare(
            lambda inputs=inputs: loaded(*inputs),
            lambda inputs=inputs: original(params, *inputs),
            rounds,
        )
        q1, _, q3 = statistics.quantiles(ratios)
        print(
            f"{str(size):>12} {1e3 * t_artifact:>12.3f} {1e3 * t_original:>9.3f} "
            f"{statistics.median(ratios):>6.2f}x {q1:>6.2f}-{q3:.2f}"
        )
    print("ratio: artifact / jit, per round (1.00x: the artifact costs nothing extra per call)")


if __name__ == "__main__":
    main()
