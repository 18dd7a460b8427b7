"""What kind of failure a failed cell's is, and for an error it raised, who
raised it and where: report.py groups failures by kind (a crash is never
grouped with a comparison, nor two kinds of comparison together), and says
what to do about each by who raised it (the op: a refusal to declare, or a
bug; the reference or the oracle: theirs to fix).

Who raised an error is read from its traceback: the outermost frame that
runs the op's, the reference's or the oracle's own code (their __code__:
file, function and line), the reference counting as the oracle under the
engine's float64 oracle; where, the deepest frame outside JAX, NumPy,
pytest, the kit and Python's own library.
"""

from __future__ import annotations

import os
import re
import sys
import traceback as tb
from pathlib import Path
from typing import Any

# An error the cell raised: "[cell] TypeError: ...", after any "not the
# declared refusal (...): " (run_one). A comparison's line names a check.
RAISED_PATTERN = re.compile(r"^(?:not the declared refusal \([^)]*\): )?([A-Z][\w.]*): ")
# What a comparison's first line says failed, in the order tried.
_ASSERTION_KINDS = (
    ("off by", "tolerance"),
    ("non-finite value", "non-finite"),
    ("collectives", "collectives"),
    ("abstract result", "abstract result"),
    ("differ between two runs", "determinism"),
    ("consumed", "consumed"),
    ("sharded", "sharding"),
    ("placed", "sharding"),
    ("without a message", "internal assert"),
    ("refusal", "refusal"),
    ("DID NOT RAISE", "refusal"),
)


def failure_kind(result: Any) -> str:
    """What kind of failure a failed cell's is: "raised <Type>" for an error
    it raised (a crash), else what its comparison found: tolerance,
    non-finite, collectives, abstract result, determinism, consumed,
    sharding, internal assert, refusal, or comparison."""
    body = result.line.removeprefix(f"[{result.cell}] ")
    raised = RAISED_PATTERN.match(body)
    if raised:
        return f"raised {raised[1]}"
    return next((kind for words, kind in _ASSERTION_KINDS if words in body), "comparison")


# A value beyond the tolerance (or non-finite) in the reference too: its
# inputs may be beyond the problem in this dtype, which the declaration says.
VALUE_MISSES = ("tolerance", "non-finite")
OP, REFERENCE, ORACLE = "the op", "the plain-JAX reference", "the float64 oracle"


def raised_by(spec: Any, error: BaseException) -> tuple[str, str]:
    """Who raised an error a cell raised, OP, REFERENCE or ORACLE (the
    declared one, or the reference run in float64), "" where none of their
    frames is on its traceback (JAX's, or the engine's); and where: the
    deepest frame outside JAX, NumPy and the kit (file:line, function)."""
    frames: list[Any] = max(
        (tb.extract_tb(t) for t in (error.__traceback__, _cause_tb(error)) if t),
        key=len,
        default=[],
    )
    roles = [
        (role, _code_of(fn))
        for role, fn in (
            (OP, spec.op), (OP, spec.auto_op), (REFERENCE, spec.reference),
            (ORACLE, spec.oracle), (ORACLE, spec.gradient_oracle),
        )
    ]  # fmt: skip
    who = ""
    for i, frame in enumerate(frames):
        found = next((role for role, code in roles if code and _runs(frame, code)), "")
        if found:
            # The reference under the engine's oracle is the float64 oracle.
            engine_oracle = any(
                f.name in ("oracle", "vjp_oracle") and Path(f.filename).name == "oracles.py"
                for f in frames[:i]
            )
            who = ORACLE if found == REFERENCE and engine_oracle else found
            break
    mine = [f for f in frames if not _library(f.filename)]
    last = (mine or frames or [None])[-1]
    where = f"{Path(last.filename).name}:{last.lineno} ({last.name})" if last else ""
    return who, where


def _cause_tb(error: BaseException) -> Any:
    cause = error.__cause__ or error.__context__
    return getattr(cause, "__traceback__", None)


def _code_of(fn: Any) -> Any:
    """The code object a function (or jit, custom_vjp, partial of one) runs."""
    for _ in range(8):
        if fn is None or hasattr(fn, "__code__"):
            break
        fn = next((getattr(fn, a) for a in ("__wrapped__", "fun", "func") if hasattr(fn, a)), None)
    return getattr(fn, "__code__", None)


def _runs(frame: Any, code: Any) -> bool:
    return (
        frame.name == code.co_name
        and Path(frame.filename).resolve() == Path(code.co_filename).resolve()
        and any(line == frame.lineno for _, _, line in code.co_lines())
    )


def _library(filename: str) -> bool:
    """A frame of JAX, NumPy, pytest, the kit, or Python itself."""
    if filename.startswith("<"):
        return True
    modules = [sys.modules.get(m) for m in ("jax", "jaxlib", "numpy", "_pytest", "pluggy")]
    folders = [Path(m.__file__).resolve().parent for m in modules if m and m.__file__]
    folders += [Path(__file__).resolve().parents[1], Path(os.__file__).resolve().parent]
    path = Path(filename).resolve()
    return any(path.is_relative_to(f) for f in folders[:-1]) or path.parent == folders[-1]


def crash_advice(result: Any, error: str) -> str:
    """What to do about an error a cell raised, by who raised it."""
    at = f" at {result.raised_at}" if result.raised_at else ""
    if result.raised_by == OP:
        return (
            f"the op raises it{at}: where it does not support this cell by design, declare "
            f"the refusal, refuse={{{result.cell.partition('@')[0]!r}: Refuse({error}, "
            "match=..., why=...)}; else fix the op there"
        )
    if result.raised_by in (REFERENCE, ORACLE):
        return f"{result.raised_by} raises it{at}, not the op: fix {result.raised_by}"
    if not result.raised_by and not at:
        return ""  # a result that does not say (made by hand, or read back)
    if not result.raised_by:
        return f"raised{at}, in no frame of the op, the reference or the oracle: JAX's or the kit's"
    return f"raised by {result.raised_by}{at}"
