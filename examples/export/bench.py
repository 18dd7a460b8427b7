"""Exported artifact vs jax.jit of the model code: size, load time, cold start, steady state.

    python examples/export/bench.py [--quick]

1. Trains and exports the classifier into a temporary folder (as export_model.py does).
2. Artifact size, and the time of `export.deserialize` (median, in this process).
3. Cold start, time to first prediction in a fresh process: python start + imports + load +
   first call (which compiles). "serve.py" runs from a folder holding only serve.py and the
   artifact; "model + jit" imports the model code, loads the saved weights (.npz, no
   training) and calls `jax.jit(model.predict)`. Wall-clock from spawning the process to its
   "ready" line, median of several runs; each child also reports its own phases.
4. Steady state, in this process: `jax.jit(exported.call)` of the deserialized artifact vs
   `jax.jit(model.predict)` with the weights as arguments, and vs `jax.jit` of the closure that
   was exported (weights baked in as constants, as in the artifact), per batch size: warm-up,
   then the median of many calls, timed in alternation, each ended by
   `jax.block_until_ready`.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from export_model import VJP_ORDER, inference_fn, train_and_export
from jax import export
from model import predict

HERE = Path(__file__).resolve().parent

# A child process that times its own three phases: imports, loading what it serves, and
# the first call (which compiles); it prints them on its "ready" line.
CHILD = """
import sys, time
t0 = time.perf_counter()
import numpy as np
{imports}
t1 = time.perf_counter()
{load}
x = np.load(sys.argv[2])["x"]
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
{after}
print("ready", t1 - t0, t2 - t1, t3 - t2, flush=True)
"""

SERVE_CHILD = CHILD.format(
    imports="import serve",
    load="classifier = serve.load(sys.argv[1])",
    call="classifier.predict(x)  # returns NumPy arrays: the result is ready",
    after='assert "model" not in sys.modules',
)
JIT_CHILD = CHILD.format(
    imports="import jax\nimport model",
    load="params = model.load_weights(sys.argv[1])",
    call="jax.block_until_ready(jax.jit(model.predict)(params, x))",
    after="",
)


def time_to_ready(code, args, pythonpath, cwd):
    """Seconds from spawning `python -c code args` to its "ready" line, and its own phases."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(pythonpath)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    total = time.perf_counter() - start
    _, stderr = proc.communicate()
    if proc.returncode != 0 or not line.startswith("ready"):
        raise RuntimeError(f"child failed (rc {proc.returncode}):\n{stderr}")
    phases = [float(v) for v in line.split()[1:]]
    return total, phases


def cold_start(serve_dir, artifact, weights, requests, runs):
    """Medians over `runs` alternating runs: {label: (total, [python start (the rest of the
    total), imports, load, first call])}."""
    children = {
        "serve.py": (SERVE_CHILD, (artifact, requests), serve_dir),
        "model + jit": (JIT_CHILD, (weights, requests), HERE),
    }
    samples = {label: [] for label in children}
    for _ in range(runs):
        for label, (code, args, path) in children.items():
            samples[label].append(time_to_ready(code, args, path, serve_dir))
    # Each column is its own median, so the columns need not add up to the total exactly.
    return {
        label: (
            statistics.median(total for total, _ in runs_),
            [statistics.median(total - sum(phases) for total, phases in runs_)]
            + [statistics.median(phases[i] for _, phases in runs_) for i in range(3)],
        )
        for label, runs_ in samples.items()
    }


def median_seconds(calls, repeats):
    """Median seconds per call of each (fn, args) in `calls`, timed in alternation so that a
    slow patch of the machine hits all of them alike."""
    for fn, args in calls:
        for _ in range(3):  # warm-up: the first call compiles for this shape
            jax.block_until_ready(fn(*args))
    times = [[] for _ in calls]
    for _ in range(repeats):
        for (fn, args), samples in zip(calls, times, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and sizes")
    args = parser.parse_args()
    if args.quick:
        runs, loads, batches, calls_small = 3, 20, (1, 1000), 300
    else:
        runs, loads, batches, calls_small = 7, 100, (1, 100, 10_000, 100_000), 1000

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        shipped = train_and_export(tmp / "training")
        elapsed = time.perf_counter() - start
        print(
            f"jax {jax.__version__} on {jax.devices()[0].platform}; trained + exported in "
            f"{elapsed:.1f} s, test accuracy {shipped['test_accuracy']:.3f}"
        )

        blob = shipped["artifact"].read_bytes()
        with_vjp = len(shipped["exported"].serialize(vjp_order=1))
        print(
            f"artifact size: {len(blob)} bytes (vjp_order={VJP_ORDER}, "
            f"platforms {', '.join(shipped['exported'].platforms)}); "
            f"with vjp_order=1: {with_vjp} bytes"
        )
        export.deserialize(bytearray(blob))  # first call imports the serialization module
        times = []
        for _ in range(loads):
            t = time.perf_counter()
            exported = export.deserialize(bytearray(blob))
            times.append(time.perf_counter() - t)
        print(f"deserialize: {statistics.median(times) * 1e3:.2f} ms (median of {loads})")

        serve_dir = tmp / "serving"
        serve_dir.mkdir()
        for path in (HERE / "serve.py", shipped["artifact"], shipped["metadata"]):
            shutil.copy(path, serve_dir / path.name)
        requests = serve_dir / "request.npz"
        np.savez(requests, x=np.zeros((1, 2), np.float32))
        artifact = serve_dir / shipped["artifact"].name
        results = cold_start(serve_dir, artifact, shipped["weights"], requests, runs)

    print()
    print(f"cold start to first prediction (batch 1), fresh process, median of {runs} runs, s:")
    print(f"{'':<12} {'total':>7} {'py start':>9} {'imports':>8} {'load':>7} {'1st call':>9}")
    for label, (total, phases) in results.items():
        cells = "".join(f"{v:>{w}.3f}" for v, w in zip(phases, (10, 9, 8, 10), strict=True))
        print(f"{label:<12} {total:>7.3f}{cells}")
    ratio = results["serve.py"][0] / results["model + jit"][0]
    print(f"ratio serve.py / model + jit: {ratio:.2f}x")

    print()
    print("steady state, ms per call (median of `calls` after warm-up):")
    print("  jax.jit: jit(model.predict)(weights, x); baked: jit of the exported closure,")
    print("  weights as constants like in the artifact; ratios: artifact / each")
    print(
        f"{'batch':>7} {'calls':>6} {'artifact':>10} {'jax.jit':>10} {'baked':>10} "
        f"{'ratio':>7} {'ratio':>7}"
    )
    served = jax.jit(exported.call)
    original = jax.jit(predict)
    baked = jax.jit(inference_fn(shipped["params"]))
    params = shipped["params"]
    for batch in batches:
        x = np.random.default_rng(batch).uniform(-4, 4, (batch, 2)).astype(np.float32)
        repeats = calls_small if batch <= 1000 else max(20, 2_000_000 // batch)
        calls = [(served, (x,)), (original, (params, x)), (baked, (x,))]
        t_art, t_jit, t_baked = median_seconds(calls, repeats)
        print(
            f"{batch:>7} {repeats:>6} {t_art * 1e3:>10.4f} {t_jit * 1e3:>10.4f} "
            f"{t_baked * 1e3:>10.4f} {t_art / t_jit:>6.2f}x {t_art / t_baked:>6.2f}x"
        )


if __name__ == "__main__":
    main()
