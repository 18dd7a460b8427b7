"""Time of the FFI tridiagonal solver against JAX's own solver and a lax.scan Thomas algorithm.

    python examples/ffi/bench.py [--quick]

Three solvers, float32, each jitted: `ffi` (this example's handler), `lax`
(jax.lax.linalg.tridiagonal_solve: LAPACK gtsv on the CPU) and `scan` (reference.py's plain-JAX
Thomas algorithm). Two programs each: the forward solve, and forward+backward
(jit(value_and_grad) of sum(c * x) with respect to all four operands). Then the use case:
Crank-Nicolson steps of the heat equation (heat.py), forward and the gradient with respect to
the diffusivity.

Each time is the median of repeated calls after a warm-up, each ended by block_until_ready.
Ratios are other / ffi: above 1x the FFI solver is faster. `err` is each forward solution's
error bound relative to max |x| (float64 residual / dominance margin, reference.py): the
timings are for correct answers.

Everything runs on the CPU device, also where the default backend is a GPU: the handler is
CPU-only, and the three solvers are compared on one device.
"""

import sys
from pathlib import Path

import jax

jax.config.update("jax_default_device", "cpu")  # the handler's one platform, for all three

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from heat import crank_nicolson  # noqa: E402
from reference import (  # noqa: E402
    lax_tridiagonal_solve,
    numpy_residual,
    random_system,
    scan_tridiagonal_solve,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for shared/
from shared.timing import bench_arguments, median_seconds  # noqa: E402

try:
    from tridiagonal import tridiagonal_solve

    SOLVERS = {"ffi": tridiagonal_solve}
except ImportError as err:  # still time the two plain-JAX solvers, and say why
    print(f"NOTE: FFI solver not available, timing only lax and scan.\n{err}\n")
    SOLVERS = {}
SOLVERS.update(lax=lax_tridiagonal_solve, scan=scan_tridiagonal_solve)
BASE = next(iter(SOLVERS))  # ratios are relative to this one: ffi when it is built


def programs(solve):
    forward = jax.jit(solve)
    backward = jax.jit(
        jax.value_and_grad(lambda c, *s: jnp.sum(c * solve(*s)), argnums=(1, 2, 3, 4))
    )
    return forward, backward


def relative_error_bound(system, x):
    scale = np.max(np.abs(np.asarray(x, np.float64)))
    return np.max(np.abs(numpy_residual(*system, x))) / scale


def cells(times):
    """Each solver's ms, then the ratio of every other solver to the first."""
    base = times[BASE]
    out = [f"{t * 1e3:>9.3f}" for t in times.values()]
    out += [f"{t / base:>6.2f}x" for name, t in times.items() if name != BASE]
    return " ".join(out)


def group_header():
    ms = " ".join(f"{name + ' ms':>9}" for name in SOLVERS)
    return ms + " " + " ".join(f"{name + '/' + BASE:>7}" for name in SOLVERS if name != BASE)


def run_solve(batch, n, repeats, rng):
    system = random_system(rng, (batch, n), np.float32)
    c = jnp.asarray(rng.standard_normal((batch, n)), np.float32)
    forward, backward, errors = {}, {}, []
    for name, solve in SOLVERS.items():
        fwd, bwd = programs(solve)
        errors.append(relative_error_bound(system, fwd(*system)))
        forward[name] = median_seconds(fwd, system, repeats)
        backward[name] = median_seconds(bwd, (c, *system), repeats)
    err = " ".join(f"{e:>8.1e}" for e in errors)
    print(f"{batch:>6} {n:>7} | {cells(forward)} | {cells(backward)} | {err}", flush=True)


def run_heat(rods, n, steps, repeats, rng):
    u0 = jnp.asarray(rng.random((rods, n)), np.float32)
    kappa = jnp.asarray(rng.uniform(0.1, 2.0, rods), np.float32)
    dt = 1e-4
    forward, gradient = {}, {}
    for name, solve in SOLVERS.items():
        simulate = jax.jit(lambda k, s=solve: crank_nicolson(s, u0, k, dt, steps))
        loss = lambda k, s=solve: jnp.sum(crank_nicolson(s, u0, k, dt, steps) ** 2)  # noqa: E731
        loss_grad = jax.jit(jax.grad(loss))
        forward[name] = median_seconds(simulate, (kappa,), repeats)
        gradient[name] = median_seconds(loss_grad, (kappa,), repeats)
    print(f"{rods:>6} {n:>7} {steps:>6} | {cells(forward)} | {cells(gradient)}", flush=True)


def main():
    args = bench_arguments(__doc__, quick="small sizes").parse_args()
    rng = np.random.default_rng(0)

    if args.quick:
        sizes, heat_sizes, repeats, heat_repeats = [(64, 256)], [(16, 127, 50)], 5, 3
    else:
        # Batches below 16 systems take the handler's one-system-at-a-time path.
        sizes = [(1, 100_000), (8, 4096), (16, 4096), (256, 256), (4096, 16), (65_536, 4)]
        heat_sizes, repeats, heat_repeats = [(1, 1023, 500), (256, 255, 500)], 20, 5

    print(f"jax {jax.__version__} on cpu, float32; times: median ms")
    if jax.default_backend() != "cpu":
        print(f"(on the CPU device, not {jax.default_backend()}: the handler is CPU-only)")
    print(f"ratios: other / {BASE} (above 1x: {BASE} is faster)")
    group = group_header()
    print(f"\nsolve: forward | forward+backward | err ({', '.join(SOLVERS)})")
    print(f"{'batch':>6} {'n':>7} | {group} | {group} |")
    for batch, n in sizes:
        run_solve(batch, n, repeats, rng)
    print("\nheat equation, Crank-Nicolson: simulate | grad w.r.t. kappa")
    print(f"{'rods':>6} {'n':>7} {'steps':>6} | {group} | {group}")
    for rods, n, steps in heat_sizes:
        run_heat(rods, n, steps, heat_repeats, rng)


if __name__ == "__main__":
    main()
