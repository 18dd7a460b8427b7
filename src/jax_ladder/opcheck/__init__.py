"""The conformance matrix, as the kit keeps it: one source for the engine every
generated project carries (templates/shared_files.py writes these modules into
a project's tests/ and benchmarks/ folders, with flat imports), and the same
matrix for any repository's op, from one declaration file (docs/opcheck.md).

- conformance: the cells (transformation x sharding x platform) built from an
  op's declaration (OpSpec, Arg), each compared with the plain-JAX reference
  and the float64 oracle; a package: the declaration language, the oracles,
  the reading of compiled programs (hlo) and one module per family of cells;
- compare: the comparison in ulps, per dtype and platform;
- devices: the devices a sharding cell's mesh runs on;
- support_table: the README's table of what passes, refuses or fails;
- plot: the benchmarks' drawing and the chips' peaks;
- report: `check(spec)`, the matrix run in-process, and its Report (not
  copied into projects);
- plugin: the pytest plugin that makes a declaration's cells test items
  (`opcheck_specs`, `--opcheck`), its options and hooks; plugin_items: its
  items (a declaration file's collection, the cells, what a failed one
  shows and the commands that rerun it; neither copied into projects);
- intercept: the plugin's recording of the inputs a suite already gives an
  op (`--opcheck-record`), their replay, and the expected failures
  (`opcheck_failures.json`; not copied into projects);
- shrink: a failing cell on the smallest declaration that still fails it
  (`check(..., shrink=True)`, `--opcheck-shrink`); repro: the standalone
  script that reproduces it (neither copied into projects).

Here, the declaration language (OpSpec, Arg, Refuse, Collectives, Ulps) and
check(). They are imported when first used, not with this package: the
pytest plugin, loaded by every pytest run where the kit is installed, must
not import JAX (nor start its backend, which would fix its CPU device count)
in a run that does not use it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import Ulps
    from .conformance import cell_names
    from .conformance.declaration import Arg, Collectives, OpSpec, Refuse
    from .conformance.validation import DeclarationError, check_declaration
    from .report import CellResult, Report, check

# Each name -> the module that defines it.
_EXPORTS = {
    "OpSpec": "conformance.declaration",
    "Arg": "conformance.declaration",
    "Refuse": "conformance.declaration",
    "Collectives": "conformance.declaration",
    "DeclarationError": "conformance.validation",
    "check_declaration": "conformance.validation",
    "cell_names": "conformance",
    "Ulps": "compare",
    "check": "report",
    "Report": "report",
    "CellResult": "report",
}
__all__ = [
    "Arg",
    "CellResult",
    "Collectives",
    "DeclarationError",
    "OpSpec",
    "Refuse",
    "Report",
    "Ulps",
    "cell_names",
    "check",
    "check_declaration",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
