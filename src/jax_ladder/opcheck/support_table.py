"""The README's support table: one row per conformance cell, written from
the cells' own results.

    python tests/support_table.py          # run the cells, then write README.md's table
    python tests/support_table.py --check  # exit 1 if README.md's table is stale

Every cell passes either by matching the oracle or by raising the refusal
tests/op_spec.py declares, so once the cells pass the table follows from the
declaration; tests/test_conformance.py fails while the README disagrees.
"""

import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"
BEGIN = "<!-- support-table: written by tests/support_table.py; do not edit by hand -->"
END = "<!-- /support-table -->"


FAMILIES = {  # the first cell-name prefix that matches names the row
    "eager": "values",
    "jit-donate": "values",
    "jit-grad": "autodiff",
    "jit-": "jit, sharded inputs",
    "jit": "values",
    "jacfwd": "autodiff",
    "vmap-jvp": "autodiff",  # forward mode, batched: with jvp, which it follows
    "vmap-": "vmap",
    "grad-grad-explicit-": "jit, sharded inputs",  # second order on an Explicit mesh
    "grad-": "autodiff",
    "size-": "sizes",
    "vjp": "autodiff",
    "jvp": "autodiff",
    "linearize": "autodiff",
    "check-grads-": "autodiff",
    "checkpoint": "control flow",
    "scan": "control flow",
    "cond": "control flow",
    "hard-": "hard inputs",
    "shard-map-": "shard_map",
    "export-": "export",
    "lower-": "export",
}


def family(cell):
    return next(f for prefix, f in FAMILIES.items() if cell.startswith(prefix))


def render(spec, failed=frozenset()):
    """One row per family of cells: those that match the oracle, and those
    refused (or failing), each with its note."""
    from .conformance import cell_names, declared_collectives, ill_conditioned, refusal

    rows = {}
    for cell in cell_names(spec):
        # notes: each note once, with the cells it applies to, in first-seen order
        ok, notes = rows.setdefault(family(cell), ([], {}))
        refuse = refusal(spec, cell)
        if cell in failed:
            notes.setdefault("**fails** (see its test)", []).append(cell)
        elif refuse is not None:
            notes.setdefault(refuse.why, []).append(cell)
        else:
            ok.append(f"`{cell}`")
            why = ill_conditioned(spec, cell)
            if why is not None:
                notes.setdefault(
                    f"ill-conditioned, held to the reference's own error: {why}", []
                ).append(cell)
            declared = declared_collectives(spec, cell)
            if declared is not None:
                notes.setdefault(_collectives_note(declared), []).append(cell)
    lines = ["| cells | match the oracle | refused, or a note |", "| -- | -- | -- |"]
    for name, (ok, notes) in rows.items():
        said = [", ".join(f"`{c}`" for c in cells) + f" {note}" for note, cells in notes.items()]
        lines.append(f"| {name} | {', '.join(ok) or '-'} | {'; '.join(said) or '-'} |")
    return "\n".join([BEGIN, "", *lines, "", END])


def _collectives_note(declared):
    """The note for a cell's declared collectives (conformance.Collectives):
    its why, after the one program it counts, if one ("gradient: ...")."""
    from .conformance import PROGRAMS

    counted = [p for p in PROGRAMS if getattr(declared, p) is not None]
    return declared.why if len(counted) == len(PROGRAMS) else f"{counted[0]}: {declared.why}"


def current_block(text):
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, flags=re.S)
    return match.group(0) if match else None


def run_cells():
    """The names of the cells that fail, from one pytest run of them."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "cells.xml")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-k",
                "test_cell",
                f"--junitxml={report}",
                str(TESTS / "test_conformance.py"),
            ],
            cwd=TESTS.parent,
            check=False,
        )
        failed = set()
        for case in ET.parse(report).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(re.search(r"\[(.*)\]$", case.get("name")).group(1))
        return failed


def main(argv):
    sys.path.insert(0, str(TESTS))
    from op_spec import SPEC

    text = README.read_text()
    block = current_block(text)
    if block is None:
        print(f"README.md has no support table (put {BEGIN!r} ... {END!r} where it goes)")
        return 1
    if "--check" in argv:
        stale = block != render(SPEC)
        print("README.md's support table is stale: run tests/support_table.py" if stale else "ok")
        return int(stale)
    failed = run_cells()
    README.write_text(text.replace(block, render(SPEC, failed)))
    print(f"wrote the support table: {len(failed)} failing cell(s)")
    return int(bool(failed))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
