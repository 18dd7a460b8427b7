"""Run every cell of the conformance matrix for each op of specs.py, and write
the reports (reports.md beside this file): per op, each cell passed, refused
(the declared reason) or failed (the first line of the error).

    PYTHONPATH=src python examples/opcheck/run.py            # all ops, writes reports.md
    PYTHONPATH=src python examples/opcheck/run.py --op softmax --cell hard

optax is optional: without it, its op is left out (and the report says so).
"""

import argparse
import datetime
import sys
import time
from pathlib import Path

import jax

# What the engine needs, before JAX starts its backend (as a generated
# project's tests/conftest.py does): eight CPU devices for the mesh cells, and
# float64 for the oracles and check_grads' finite differences.
jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(Path(__file__).parent))
import specs  # noqa: E402

from jax_ladder.opcheck import cell_names, check  # noqa: E402
from jax_ladder.opcheck.compare import WORST  # noqa: E402

OUTCOMES = ("passed", "refused", "failed", "skipped")

HERE = Path(__file__).parent


def run_spec(spec, only=None):
    """[(cell, status, note)] for each cell of spec (or those whose names contain
    one of `only`), as the kit's check() reports them: passed, refused (the
    declaration's why), failed (the error's first line) or skipped (why)."""
    names = cell_names(spec)
    chosen = [c for c in names if not only or any(pattern in c for pattern in only)]
    if not chosen:
        return []
    return [(r.cell, r.outcome, first_line(r.message)) for r in check(spec, cells=chosen)]


def first_line(message):
    return message.splitlines()[0] if message else ""


def summary(rows):
    counts = {s: sum(1 for _, status, _ in rows if status == s) for s in OUTCOMES}
    return ", ".join(f"{counts[s]} {s}" for s in OUTCOMES if counts[s] or s != "skipped")


def cell_text(text):
    return text.replace("|", "\\|").replace("\n", " ")


def report(results, seconds):
    device = jax.devices()[0]
    lines = [
        "# Conformance reports",
        "",
        f"Written by `examples/opcheck/run.py` on {datetime.date.today().isoformat()}: "
        f"JAX {jax.__version__}, jaxlib {jax.lib.__version__}, default device "
        f"{device.platform} ({device.device_kind}), {seconds:.0f} s. "
        "README.md says what each failure is.",
        "",
    ]
    if specs.projection_simplex is None:
        lines += ["optax is not installed: its op is left out.", ""]
    for spec, rows in results:
        lines += [f"## {spec.name}", "", f"**{summary(rows)}**", ""]
        lines += ["| cell | result | note |", "|---|---|---|"]
        lines += [f"| {cell} | {status} | {cell_text(note)} |" for cell, status, note in rows]
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", nargs="*", help="only the ops whose names contain one of these")
    parser.add_argument("--cell", nargs="*", help="only the cells whose names contain one of these")
    parser.add_argument("--print", action="store_true", help="print, do not write reports.md")
    options = parser.parse_args()
    chosen = [s for s in specs.SPECS if not options.op or any(o in s.name for o in options.op)]
    start = time.perf_counter()
    results = []
    for spec in chosen:
        begun = time.perf_counter()
        WORST.update(error=0.0, fraction=0.0, ulps=0.0, dtype="", test="")
        rows = run_spec(spec, options.cell)
        results.append((spec, rows))
        print(f"{spec.name}: {summary(rows)} ({time.perf_counter() - begun:.0f} s)", flush=True)
        print(
            f"  closest to its tolerance: {100 * WORST['fraction']:.0f}% in {WORST['test']} "
            f"({WORST['ulps']:.3g} ulps at the value)"
        )
        for cell, status, note in rows:
            if status == "failed":
                print(f"  {cell}: {note[:300]}")
    text = report(results, time.perf_counter() - start)
    if options.print or options.op or options.cell:
        print(text)
    else:
        (HERE / "reports.md").write_text(text)
        print(f"wrote {HERE / 'reports.md'}")


if __name__ == "__main__":
    main()
