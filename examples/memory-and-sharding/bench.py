"""Time, memory and bytes communicated per step of the 2-D wave equation, three ways.

    python examples/memory-and-sharding/bench.py [--quick]

- single: `jax.jit` of the plain-JAX reference (reference.py) on one device;
- auto: the same function under `jax.jit` with `in_shardings` / `out_shardings` over a
  (2, 4) mesh with Auto axes: XLA's partitioner decides the communication;
- shard_map: wave2d.py, the halo exchange written with `lax.ppermute`, same mesh.

All three donate the state and are timed the way a simulation runs: each call's outputs are
the next call's inputs (warm-up, then the median over calls of `steps` time steps each,
ended by `jax.block_until_ready`). Reported per time step: wall time; the bytes the
collectives in the loop body move into one device (their result sizes, from the compiled
HLO); the count of those collectives; and the compiled program's temporary memory per device
(`memory_analysis().temp_size_in_bytes`).

Eight devices: the accelerator's if it has eight, otherwise eight simulated CPU devices. On
simulated devices "communication" is a memory copy and the eight devices share the machine's
cores, so the sharded versions cannot beat one device there; compare shard_map with auto,
which pay the same costs.
"""

import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding
from reference import simulate_reference
from shared.devices import mesh_devices
from shared.hlo import collectives
from shared.timing import bench_arguments
from wave2d import SPEC, _simulate, courant_squared, start_at_rest

# Before anything starts the backend: the CPU backend only reads this once.
jax.config.update("jax_num_cpu_devices", 8)

MESH_SHAPE = (2, 4)


def initial_state(n):
    h = 1.0 / (n + 1)
    speed = np.where(np.arange(n)[:, None] < n // 2, 1.0, 1.6) * np.ones((1, n))
    c2 = courant_squared(speed, 0.95 * h * np.sqrt(0.5) / speed.max(), h)
    rows, cols = np.arange(n)[:, None] / n, np.arange(n)[None, :] / n
    u0 = np.exp(-((rows - 0.3) ** 2 + (cols - 0.4) ** 2) / 0.002).astype(np.float32)
    u_prev, u = start_at_rest(u0, c2)
    return np.asarray(u_prev), np.asarray(u), c2


def versions(devices, steps):
    """name -> (jitted fn (u_prev, u, c2) -> (u_prev, u), the sharding of its inputs)."""
    explicit = jax.make_mesh(MESH_SHAPE, ("x", "y"), devices=devices)
    auto_mesh = jax.make_mesh(
        MESH_SHAPE, ("x", "y"), axis_types=(AxisType.Auto,) * 2, devices=devices
    )
    auto = NamedSharding(auto_mesh, SPEC)

    def reference(u_prev, u, c2):
        return simulate_reference(u_prev, u, c2, steps)

    return {
        "single": (
            jax.jit(reference, donate_argnums=(0, 1)),
            jax.sharding.SingleDeviceSharding(devices[0]),
        ),
        "auto": (
            jax.jit(
                reference,
                in_shardings=(auto,) * 3,
                out_shardings=(auto,) * 2,
                donate_argnums=(0, 1),
            ),
            auto,
        ),
        "shard_map": (
            partial(_simulate, steps=steps, mesh=explicit),
            NamedSharding(explicit, SPEC),
        ),
    }


def measure(fn, sharding, state, repeats):
    u_prev, u, c2 = (jax.device_put(a, sharding) for a in state)
    # The program the calls below run (compiled again by the first call: same HLO).
    compiled = jax.jit(fn).lower(u_prev, u, c2).compile()
    in_loop = [c for c in collectives(compiled.as_text()) if c.in_loop]
    temp = compiled.memory_analysis().temp_size_in_bytes
    for _ in range(2):  # warm-up
        u_prev, u = jax.block_until_ready(fn(u_prev, u, c2))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        u_prev, u = jax.block_until_ready(fn(u_prev, u, c2))
        times.append(time.perf_counter() - start)
    return statistics.median(times), in_loop, temp, np.asarray(u)


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def main():
    args = bench_arguments(__doc__, quick="one small grid").parse_args()
    sizes, steps, repeats = ([256], 100, 5) if args.quick else ([256, 1024, 2048], 200, 7)

    devices = mesh_devices(8)
    print(
        f"jax {jax.__version__}; {len(devices)} {devices[0].platform} devices, mesh "
        f"{MESH_SHAPE}; float32 (n, n) grid, {steps} steps per call, median of {repeats} calls"
    )
    print("per step: time, and per device: collectives in the loop, bytes they move, temp memory")
    print(
        f"{'n':>5} {'version':>9} | {'us/step':>9} | {'colls':>5} {'bytes':>9} | "
        f"{'temp':>9} | {'max |u - single|':>16}"
    )
    ratios = []
    for n in sizes:
        state = initial_state(n)
        results = {}
        for name, (fn, sharding) in versions(devices, steps).items():
            results[name] = measure(fn, sharding, state, repeats)
        single = results["single"][3]
        for name, (seconds, in_loop, temp, u) in results.items():
            moved = sum(c.bytes for c in in_loop)
            print(
                f"{n:>5} {name:>9} | {seconds / steps * 1e6:>9.1f} | {len(in_loop):>5} "
                f"{human(moved):>9} | {human(temp):>9} | {np.max(np.abs(u - single)):>16.2e}"
            )
        (auto_s, auto_c, *_), (ours_s, ours_c, *_) = results["auto"], results["shard_map"]
        ratios.append(
            (n, auto_s / ours_s, sum(c.bytes for c in auto_c) / sum(c.bytes for c in ours_c))
        )
    for n, speed, moved in ratios:
        print(f"n={n}: shard_map vs auto-sharded jit: {speed:.2f}x the speed, ", end="")
        print(f"{moved:.2f}x fewer bytes per step")


if __name__ == "__main__":
    main()
