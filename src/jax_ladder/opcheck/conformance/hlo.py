"""What the cells read from compiled programs and jaxprs: the arguments a
compiled program aliases to outputs (jit-donate), the collectives it makes
(jit-*, shard-map-partial-*: counted, and held to the reference's or the
declared counts), and every matmul a program makes with its precision
(test_conformance.py holds the float32 ones to HIGHEST)."""

from __future__ import annotations

import contextvars
import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from .declaration import COLLECTIVES, Collectives, OpSpec, refusal
from .oracles import _float, _grad_of, _to64, cotangents_for, make_args

# --- Aliasing (jit-donate) -------------------------------------------------------------
_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),")


def _aliased(compiled_text: str) -> dict[int, int]:
    """The compiled (HLO) program's input_output_alias: argument -> the
    output whose buffer it is (0 for a single output). Leading token
    parameters (an ordered effect's, such as Pallas's interpreter callbacks)
    are no argument: parameter numbers are counted past them."""
    header = compiled_text.split("\n", 1)[0]
    found = re.search(r"input_output_alias=\{(.*?)\}\s*,\s*\w+=", header)
    if found is None:
        return {}
    layout = re.search(r"entry_computation_layout=\{\((.*?)\)->", header)
    params = layout.group(1).split(", ") if layout else []
    tokens = next((i for i, param in enumerate(params) if param != "token[]"), len(params))
    return {
        int(param) - tokens: int(output.split(",")[0]) if output.strip() else 0
        for output, param in _ALIAS.findall(found.group(1))
    }


# --- Collectives (jit-*, shard-map-partial-*) -------------------------------------------
def _collectives(compiled_text: str) -> dict[str, int]:
    return {c: len(re.findall(rf"\b{c}(-start)?\(", compiled_text)) for c in COLLECTIVES}


def declared_collectives(spec: OpSpec, cell: str) -> Collectives | None:
    """The cell's entry in extra_collectives: an exact name wins over a glob
    (a cell in another dtype, <cell>@<dtype>, takes its cell's)."""
    if cell in spec.extra_collectives:
        return spec.extra_collectives[cell]
    for pattern, declared in spec.extra_collectives.items():
        if fnmatch.fnmatchcase(cell, pattern):
            return declared
    base, _, dtype = cell.partition("@")
    return declared_collectives(spec, base) if dtype else None


# What the cells found and did not fail on (the collectives of a cell whose
# axis the declaration never says is split): None, or a list each cell's
# notes are appended to, for whoever runs the cells to report.
NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("NOTES", default=None)


def note(text: str) -> None:
    """Record what a cell saw and did not fail on, where NOTES asks."""
    notes = NOTES.get()
    if notes is not None:
        notes.append(text)


def held_to_reference(spec: OpSpec, cell: str) -> bool:
    """Whether a cell's collectives are held to the reference's: those of the
    cells splitting only axes the declaration says the op computes per shard
    (shard_map_axes). Elsewhere how much an op communicates is a cost the
    cell reports, not a wrong result (a contracted axis split over the mesh
    costs every op some communication, and how much is XLA's choice)."""
    base = cell.partition("@")[0]
    for prefix in ("jit-explicit-set-mesh-", "jit-explicit-2d-", "jit-explicit-", "jit-auto-"):
        if base.startswith(prefix):
            axes = base.removeprefix(prefix).split("+")
            return all(a in spec.shard_map_axes for a in axes)
    # shard-map-partial-<d>: d is a shard_map axis; -free-<e> also splits e,
    # which no declaration says is split.
    return "-free-" not in base


def assert_collectives(
    spec: OpSpec, cell: str, programs: Mapping[str, Any], reference_refused: bool = False
) -> None:
    """Each program, forward and gradient (name: (the op's jitted, the
    reference's jitted, the inputs)), makes the collectives declared for it
    (exactly, or at most, as the Collectives says), else, in a cell splitting
    a shard_map axis, no more of any than the reference's on the same inputs
    (or none where JAX refuses the reference on them); in a cell splitting
    another axis, the counts are noted, not held."""
    declared = declared_collectives(spec, cell)
    held = held_to_reference(spec, cell)
    for name, (mine_fn, theirs_fn, inputs) in programs.items():
        mine = _collectives(mine_fn.lower(*inputs).compile().as_text())
        counts = getattr(declared, name) if declared is not None else None
        if counts is not None:
            want = {c: counts.get(c, 0) for c in COLLECTIVES}
            if declared.at_most:
                over = {c: (mine[c], want[c]) for c in COLLECTIVES if mine[c] > want[c]}
                assert not over, (
                    f"{name} program: collectives {_some(mine)}, more than the budget "
                    f"{_some(want)} (op, budget: {over}; extra_collectives: {declared.why})"
                )
            else:
                assert mine == want, (
                    f"{name} program: collectives {_some(mine)}, declared {_some(want)} "
                    f"(extra_collectives: {declared.why})"
                )
            continue
        if reference_refused:
            if held:
                assert not any(mine.values()), (
                    f"{name} program: collectives {_some(mine)} where JAX refuses the reference "
                    "on these shardings: declare their counts in extra_collectives"
                )
            elif any(mine.values()):
                note(f"{name} program: collectives {_some(mine)} (the reference refused)")
            continue
        theirs = _collectives(theirs_fn.lower(*inputs).compile().as_text())
        more = {c: (mine[c], theirs[c]) for c in COLLECTIVES if mine[c] > theirs[c]}
        if more and held:
            # The declaration to allow them, spelled out (no doubled braces: the
            # engine is copied into projects, which hold it free of Jinja markers).
            allow = "extra_collectives=" + repr({cell: "..."}).replace(
                "'...'", f"Collectives(why=..., {name}={_some(mine)})"
            )
            raise AssertionError(
                f"{name} program: more collectives than the reference: op {_some(mine)}, "
                f"reference {_some(theirs)}; to allow them, {allow} (exact) or "
                "at_most=True for a budget"
            )
        if more or mine != theirs:
            note(f"{name} program: collectives op {_some(mine)}, reference {_some(theirs)}")


def _some(counts: Mapping[str, int]) -> dict[str, int]:
    """The collectives a program makes (those it makes none of left out)."""
    return {c: n for c, n in counts.items() if n}


# --- Matmul precision --------------------------------------------------------------
@dataclass(frozen=True)
class Matmul:
    """One matmul of a program: operand and result dtypes, and its precision."""

    operands: tuple[str, ...]
    result: str
    precision: str  # "HIGHEST", or what else the program asked for (DEFAULT: the platform's)

    @property
    def narrows(self) -> bool:
        """Whether it asks for a result narrower than its operands (float64 x
        float64 -> float32, which no GPU library computes)."""
        bits = [jnp.finfo(o).bits for o in self.operands if _float(o)]
        return bool(bits) and min(bits) > jnp.finfo(self.result).bits


# The primitives whose float32 precision a platform chooses unless asked.
_MATMULS = ("dot_general", "conv_general_dilated")


def matmuls(fn: Callable[..., Any], *args: Any) -> list[Matmul]:
    """Every floating-point matmul (a dot_general or a convolution) fn makes
    on args: in its jaxpr, in any exported artifact it calls (read from the
    artifact's StableHLO), and not inside a Pallas kernel, whose matmuls are
    its hardware's (OpSpec.matmul_inputs)."""
    found: list[Matmul] = []

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in _MATMULS and _float(eqn.outvars[0].aval.dtype):
                precision = eqn.params.get("precision")
                found.append(
                    Matmul(
                        tuple(str(v.aval.dtype) for v in eqn.invars),
                        str(eqn.outvars[0].aval.dtype),
                        _precision_name(precision),
                    )
                )
            elif name == "call_exported":
                found.extend(_hlo_matmuls(eqn.params["exported"].mlir_module()))
            if name == "pallas_call":
                continue
            for param in eqn.params.values():
                for sub in param if isinstance(param, (tuple, list)) else (param,):
                    inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's Jaxpr
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def _precision_name(precision: Any) -> str:
    """HIGHEST for (HIGHEST, HIGHEST) or a float32 dot algorithm; DEFAULT
    (the platform's choice) for none; else its text."""
    if precision is None:
        return "DEFAULT"
    if isinstance(precision, tuple) and all(p == lax.Precision.HIGHEST for p in precision):
        return "HIGHEST"
    if precision == getattr(lax.DotAlgorithmPreset, "F32_F32_F32", None):
        return "HIGHEST"
    return str(precision)


_HLO_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


_HLO_TYPES = re.compile(
    r": \(tensor<(?:[^>]*x)?(\w+)>, tensor<(?:[^>]*x)?(\w+)>\) -> tensor<(?:[^>]*x)?(\w+)>"
)


_HLO_PRECISION = re.compile(
    r"precision(?:_config)? = \[(?:#stablehlo<precision )?(\w+)>?, (?:#stablehlo<precision )?(\w+)"
)


def _hlo_matmuls(text: str) -> list[Matmul]:
    """The floating-point dots and convolutions of a StableHLO module's text."""
    found = []
    for line in text.splitlines():
        if "stablehlo.dot_general" not in line and "stablehlo.convolution" not in line:
            continue
        types = _HLO_TYPES.search(line)
        if types is None or types[3] not in _HLO_DTYPES:
            continue
        asked = _HLO_PRECISION.search(line)
        precision = "DEFAULT" if asked is None else asked[1]
        if asked is not None and asked[1] != asked[2]:
            precision = f"{asked[1]}, {asked[2]}"
        lhs, rhs, out = (_HLO_DTYPES.get(t, t) for t in types.groups())
        found.append(Matmul((lhs, rhs), out, precision))
    return found


def _forward_and_gradient_matmuls(
    fn: Callable[..., Any], spec: OpSpec, args: list[Any], rng: Any
) -> list[Matmul]:
    """The matmuls of fn's forward program and, for an op with reverse mode,
    of its gradient program, on these arguments."""
    found = matmuls(fn, *args)
    if refusal(spec, "vjp") is None:  # an op without reverse mode has no gradient program
        cts = cotangents_for(spec, args, rng, fn)
        found += matmuls(_grad_of(spec, fn, len(args)), *args, *cts)
    return found


def float32_matmuls_not_highest(fn: Callable[..., Any], spec: OpSpec, rng: Any) -> list[Matmul]:
    """The matmuls with a float32 operand that fn's forward and gradient
    programs make at another precision than HIGHEST, on float32 arguments."""
    args = make_args(spec, rng, "float32")
    return [
        m
        for m in _forward_and_gradient_matmuls(fn, spec, args, rng)
        if "float32" in m.operands and m.precision != "HIGHEST"
    ]


def narrowing_matmuls(fn: Callable[..., Any], spec: OpSpec, rng: Any) -> list[Matmul]:
    """The matmuls of fn's forward and gradient programs, on float64
    arguments (the oracle's), that ask for a result narrower than their
    operands."""
    args = [_to64(a) for a in make_args(spec, rng)]
    return [m for m in _forward_and_gradient_matmuls(fn, spec, args, rng) if m.narrows]
