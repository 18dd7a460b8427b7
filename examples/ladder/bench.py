"""One table, rung by rung: the same RMS normalization at every rung of the ladder.

    python examples/ladder/bench.py [--quick] [--json FILE.json] [--plot FILE.svg]

For each rung (a module in this folder), float32 x: (rows, d), w: (d,), cotangent dy:

- fwd ms, v&g ms: the jitted forward, and jit(value_and_grad) of sum(y * dy) with respect to
  x and w: the median of repeated calls after a warm-up, each ended by block_until_ready.
  The rungs take turns, one call each per round, so a busy machine slows them alike.
  x ref: that time over the plain-JAX reference's (below 1x: faster).
- saved MiB: what jax.vjp keeps for the backward pass (its residuals, x and w included).
- temp, peak MiB: compiled.memory_analysis() of the value_and_grad program on one device.
- comm B: bytes of the collectives in the compiled value_and_grad program on an 8-device mesh
  (shared/devices.py: the default platform's devices where it has 8, else simulated CPU
  devices) with the rows of x and dy sharded, from the optimized HLO (shared/hlo.py).
- lines: lines of code of the rung's module (no blanks, comments or docstrings; + C++).
- fwd, v&g B/s: the least bytes each moves (x, w and dy read; y, or the gradients, written)
  per second, as a share of the chip's peak HBM bandwidth (the PEAKS table of the templates'
  benchmarks/plot.py; "-" on a CPU, whose peak it does not know). RMS normalization is
  memory-bound: its few FLOPs per element would be a tiny share of the peak FLOP/s at best.
Every forward is checked against the float64 oracle first (exit 1 if one is wrong), so the
timings are for right answers. On a CPU the Pallas rung runs in the interpreter: its time
says nothing about a kernel's. The FFI rung's handlers are CPU-only: where the default backend
is not the CPU, its row is left out (JAX_PLATFORMS=cpu times every rung on the CPU).

--json writes the table with the machine and date (results.json is one such measurement);
--plot draws it (plot.py; needs matplotlib, which the kit's docs extra has).
"""

import ast
import datetime
import importlib
import importlib.util
import io
import json
import os
import platform
import sys
import tokenize
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 8)  # before any JAX operation
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/, for shared/ (oracle.py imports it)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import oracle  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from shared.devices import mesh_devices  # noqa: E402
from shared.hlo import total_bytes  # noqa: E402
from shared.timing import bench_arguments, median_times  # noqa: E402

# rung module: what it bought over the rung below
RUNGS = {
    "reference": "the baseline: JAX differentiates, batches, shards it",
    "custom_vjp_rung": "a closed-form backward that saves only 1/rms",
    "exported": "a serialized artifact, symbolic batch, 1st-order VJP",
    "partitioned": "its own sharding rule: rows stay local",
    "pallas_kernel": "control of the memory traffic (a kernel)",
    "ffi_handler": "any C++ inside the jitted program",
    "primitive": "a first-class primitive: jvp, vjp, vmap rules",
}


def template_plot():
    """The kit's benchmark drawing (jax_ladder/opcheck/plot.py, every generated project's
    benchmarks/plot.py), loaded by path from this checkout, else from the installed kit:
    its PEAKS is the kit's one table of the chips' peaks, and `peak` looks a device up in it."""
    path = HERE.parents[1] / "src" / "jax_ladder" / "opcheck" / "plot.py"
    if not path.is_file():
        return importlib.import_module("jax_ladder.opcheck.plot")
    spec = importlib.util.spec_from_file_location("template_plot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bytes_moved(rows, d):
    """The least bytes the forward and the value-and-grad move, float32: the forward reads
    x and w and writes y; the value-and-grad reads x, w and dy and writes dx and dw."""
    return 4 * (2 * rows * d + d), 4 * (3 * rows * d + 2 * d)


def python_lines(path):
    """Lines holding code: no blank lines, comments or docstrings."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):  # a docstring
            docstrings.update(range(first.lineno, first.end_lineno + 1))
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def cpp_lines(path):
    return sum(
        1
        for line in path.read_text().splitlines()
        if line.strip() and not line.strip().startswith("//")
    )


def lines_of_code(name):
    count = str(python_lines(HERE / f"{name}.py"))
    if name == "ffi_handler":
        count += f"+{cpp_lines(HERE / 'csrc' / 'rms_norm.cc')}"
    return count


def value_and_grad(fn):
    return jax.jit(jax.value_and_grad(lambda x, w, dy: jnp.sum(fn(x, w) * dy), argnums=(0, 1)))


def mib(nbytes):
    return nbytes / 2**20


def static_figures(fn, x, w, dy, mesh):
    """Everything but the times: memory, communication, and the forward's error."""
    error = oracle.error_fraction(jax.jit(fn)(x, w), oracle.rms_norm(x, w))
    _, vjp_fn = jax.vjp(fn, x, w)
    saved = sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(vjp_fn))
    memory = value_and_grad(fn).lower(x, w, dy).compile().memory_analysis()
    with jax.set_mesh(mesh):
        rows = NamedSharding(mesh, P("rows", None))
        xs, dys = jax.device_put(x, rows), jax.device_put(dy, rows)
        comm = total_bytes(value_and_grad(fn).lower(xs, w, dys).compile().as_text())
    return {
        "saved": mib(saved),
        "temp": mib(memory.temp_size_in_bytes),
        "peak": mib(memory.peak_memory_in_bytes),
        "comm": comm,
        "error": error,
    }


def machine():
    """A short description of this machine: CPU model and core count, and the JAX device."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        models = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = models[0] if models else cpu
    return f"{cpu}, {os.cpu_count()} cores, {jax.devices()[0].device_kind}"


def results_record(rows, d, rounds, figures, forward, backward):
    """The table as data, with what it was measured on: what --json writes, --plot draws."""
    return {
        "machine": machine(),
        # Other jobs slow every rung alike (they take turns), but say how busy it was.
        "load_average": round(os.getloadavg()[0], 1),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "jax": jax.__version__,
        "shape": [rows, d],
        "rounds": rounds,
        "rows": [
            {
                "rung": name,
                "fwd_ms": round(forward[name] * 1e3, 3),
                "vg_ms": round(backward[name] * 1e3, 3),
                "saved_mib": round(f["saved"], 3),
                "temp_mib": round(f["temp"], 3),
                "peak_mib": round(f["peak"], 3),
                "comm_bytes": f["comm"],
                "lines": lines_of_code(name),
                "bought": RUNGS[name],
            }
            for name, f in figures.items()
        ],
    }


def main():
    parser = bench_arguments(__doc__, quick="small sizes, few rounds (CI)")
    parser.add_argument("--json", metavar="FILE.json", help="also write the table as JSON")
    parser.add_argument("--plot", metavar="FILE.svg", help="also draw it (needs matplotlib)")
    args = parser.parse_args()
    if args.plot:
        import plot  # fails now, before measuring, if matplotlib is missing

        plot._pyplot()
    rows, d, rounds = (256, 256, 5) if args.quick else (8192, 1024, 20)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((rows, d)), jnp.float32)
    w = jnp.asarray(1 + 0.5 * rng.standard_normal(d), jnp.float32)
    dy = jnp.asarray(rng.standard_normal((rows, d)), jnp.float32)
    mesh = jax.make_mesh((8,), ("rows",), axis_types=(AxisType.Auto,), devices=mesh_devices(8))

    functions, figures = {}, {}
    for name in RUNGS:
        if name == "ffi_handler" and jax.default_backend() != "cpu":
            print(f"NOTE: {name} left out: its handlers are CPU-only, this table is for the")
            print(f"{jax.default_backend()}; JAX_PLATFORMS=cpu times every rung on the CPU")
            continue
        try:
            functions[name] = importlib.import_module(name).rms_norm
        except ImportError as err:  # the FFI rung without its compiled module
            print(f"NOTE: {name} not built, left out: {str(err).splitlines()[0]}")
            continue
        figures[name] = static_figures(functions[name], x, w, dy, mesh)
        if figures[name]["error"] > 1:
            sys.exit(f"{name}: forward error {figures[name]['error']:.3g} x the tolerance")
    forward = median_times({n: jax.jit(f) for n, f in functions.items()}, (x, w), rounds)
    backward = median_times(
        {n: value_and_grad(f) for n, f in functions.items()}, (x, w, dy), rounds
    )

    print(
        f"RMS norm, float32 x ({rows}, {d}), jax {jax.__version__}, {jax.devices()[0].device_kind}"
    )
    peaks = template_plot()
    chip = peaks.peak()  # (FLOP/s, bytes/s), or None: not known (a CPU)
    moved = bytes_moved(rows, d)
    print(
        f"{'rung':<16}{'fwd ms':>8}{'x ref':>7}{'v&g ms':>8}{'x ref':>7}{'saved':>7}{'temp':>7}"
        f"{'peak':>7}{'comm B':>10}{'fwd B/s':>9}{'v&g B/s':>9}{'lines':>7}  what it bought"
    )
    print(f"{'':<46}{'MiB':>7}{'MiB':>7}{'MiB':>7}")
    for name, f in figures.items():
        print(
            f"{name:<16}{forward[name] * 1e3:>8.2f}{forward[name] / forward['reference']:>6.2f}x"
            f"{backward[name] * 1e3:>8.2f}{backward[name] / backward['reference']:>6.2f}x"
            f"{f['saved']:>7.2f}{f['temp']:>7.2f}{f['peak']:>7.2f}{f['comm']:>10}"
            f"{peaks.share(moved[0], forward[name], chip and chip[1]):>9}"
            f"{peaks.share(moved[1], backward[name], chip and chip[1]):>9}"
            f"{lines_of_code(name):>7}  {RUNGS[name]}"
        )
    worst = max(f["error"] for f in figures.values())
    print(f"every forward matches the float64 oracle: worst error {100 * worst:.0f}% of tolerance")
    print(peaks.peak_note())
    results = results_record(rows, d, rounds, figures, forward, backward)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        plot.plot(results, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
