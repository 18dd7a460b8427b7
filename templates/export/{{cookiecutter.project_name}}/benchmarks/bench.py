{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Call time of the deserialized artifact against jax.jit of the original
model, plus artifact size and time to deserialize.

    python benchmarks/bench.py            # default sizes
    python benchmarks/bench.py --quick    # one small size, for CI smoke runs
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import jax
from jax import export

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import init_params, predict


def median_seconds(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # warm-up: compile and first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size, 3 repeats")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    sizes = {% if seq %}[(8, 16)] if args.quick else [(8, 16), (64, 128), (512, 128)]{% else %}[(8,)] if args.quick else [(8,), (1024,), (65536,)]{% endif %}

    with tempfile.TemporaryDirectory() as tmp:
        path = artifact.save(artifact.export_model(), Path(tmp) / "model.jax")
        blob = path.read_bytes()
        loaded = artifact.load(path)
        start = time.perf_counter()
        for _ in range(repeats):
            export.deserialize(bytearray(blob))
        deserialize_ms = 1e3 * (time.perf_counter() - start) / repeats

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; median of {repeats} runs")
    print(
        f"artifact: {len(blob)} bytes, platforms {', '.join(artifact.PLATFORMS)}, "
        f"deserialize {deserialize_ms:.2f} ms"
    )
    call = jax.jit(loaded.exported.call)
    original = jax.jit(predict)
    params = init_params()
    print(f"{'sizes':>12} {'artifact ms':>12} {'jit ms':>9} {'ratio':>7}")
    for size in sizes:
        inputs = artifact.random_inputs(loaded.metadata, {% if seq %}batch=size[0], seq=size[1]{% else %}batch=size[0]{% endif %}, seed=0)
        inputs = list(inputs.values())
        t_artifact = median_seconds(call, inputs, repeats)
        t_original = median_seconds(lambda *a: original(params, *a), inputs, repeats)
        print(
            f"{str(size):>12} {1e3 * t_artifact:>12.3f} {1e3 * t_original:>9.3f} "
            f"{t_artifact / t_original:>6.2f}x"
        )
    print("ratio: artifact / jit (1.00x means the artifact costs nothing extra at call time)")


if __name__ == "__main__":
    main()
