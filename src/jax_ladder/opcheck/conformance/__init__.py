"""The conformance matrix: every transformation x sharding x platform cell of
an op, built from the declaration of its signature in tests/op_spec.py.

Each cell either matches the float64 oracle or raises the refusal the
declaration names (exception type and message). This package is the same
in every jax-ladder project (the kit holds the copies equal): to adapt the
starter to your own op, edit tests/op_spec.py and your op, not these files.

Where each part lives (this module: the cells' names and run_cell, which
dispatches a cell to its family's check; every name below is importable
from here):
  declaration         OpSpec, Arg, Refuse, Collectives, the constants, and
                      what a declaration says of a cell (refusal, in_dtype)
  signature           OpSpec(signature=...): an op's signature in one line
  validation          a declaration checked when it is made (DeclarationError,
                      check_declaration), leading axes ("...")
  oracles             inputs (make_args, new axes), the float64 oracles, the
                      comparisons
  results             abstract results, determinism, no input consumed
  hlo                 what compiled programs say: aliasing, collectives,
                      matmuls and their precision
  cells_values        eager, jit, jit-donate
  cells_vmap          vmap-*
  cells_sizes         size-*
  cells_autodiff      grad-*, vjp, jit-grad, jvp, linearize, jacfwd, vmap-jvp,
                      check-grads-*
  cells_control_flow  checkpoint, scan, cond
  cells_hard          hard-*
  cells_sharding      shard-map-*, jit-auto-*, jit-explicit-*, grad-grad-explicit-*
  cells_export        export-symbolic, lower-*

Cells, for an op with arguments A and named axes D (an argument's leading
axes "...", drawn at sizes["..."], are in no cell's name: the cells run with
them named "...0", "...1", expand_leading):
  values        eager, jit (each run twice: the same bits, and no input
                consumed), jit-donate (the donated inputs consumed are
                exactly those the compiled program aliases to outputs)
  vmap          vmap-new-axis (every argument on axis 1, out_axes -1),
                vmap-only-<arg> (each argument alone), vmap-mixed (last
                axis, unbatched, first, in turn; out_axes 1), vmap-nested,
                vmap-of-grad (leading), vmap-of-grad-inner (axis 1 in, last
                out), vmap-of-grad-only-<arg>, vmap-axis-<d> for each batch
                axis, vmap-sharded-new-axis (a new leading axis split over an
                explicit mesh, make_mesh's default: values, gradients and
                the outputs' sharding); new slices are drawn as each Arg
                declares (sample, domain, smallest)
  sizes         size-<d>-1, size-<d>-ragged (a prime above the declared size
                and 4), size-<d>-large (LARGE times it), for each axis:
                jitted values and gradient; where the arguments have
                leading axes ("..."), size-...-0 and size-...-2 (none, two)
  autodiff      grad-<arg> for each differentiable argument, vjp, jit-grad,
                jvp, linearize, jacfwd, vmap-jvp (forward mode over many
                tangents: the batching of the op's tangents), check-grads-1,
                check-grads-2; a forward-mode cell the declaration does not
                refuse itself takes jvp's refusal
  control flow  checkpoint (nothing saved), scan, cond (values and gradients,
                with data that takes each branch)
  hard inputs   hard-<case> for each of HARD_CASES: every floating argument
                drawn from that case (near where exp and squares overflow,
                shifted by large constants, every magnitude between, tiny and
                subnormal, signed zeros,
                ties, all equal), within what its Arg declares it supports
                (domain, smallest); magnitudes: log-uniform between the
                standard normal's and huge's; eager, jit, vmap and the gradient
  shard_map     shard-map-<d>-<mesh>, shard-map-grad-inside-<d>-<mesh>,
                shard-map-grad-outside-<d>-<mesh>, shard-map-wrong-out-specs-<d>,
                shard-map-partial-<d> (manual over "x" of a 2x2 mesh, "y" left
                automatic and the inputs split over both: values, gradients
                and the collectives, no more than the reference's)
  jit sharding  jit-auto-<d>, jit-explicit-<d>, jit-explicit-set-mesh-<d>
                (values and gradients; the compiled collectives of the forward
                and the gradient program no more than the reference's on the
                same shardings; under an explicit mesh, the outputs sharded as
                the reference's); for shard_map axes, jit-auto-<d>+<e> (two of
                them on one mesh axis) and jit-explicit-2d-<d> (a 2x2 mesh,
                only "x" used); grad-grad-explicit-<d> (second order, reverse
                over reverse, on an explicit mesh)
  export        export-symbolic (a symbolic batch axis, serialized and called)
                and lower-<platform> for every platform the op claims: the
                module's result types; the platform's marker (its kernel or
                custom call) where declared, else the very program the CPU
                runs; for the CPU, the serialized module called

Every cell that computes results also holds them to their abstract result:
the call it makes, under jax.eval_shape, gives each result's shape and
dtype, and its sharding where the types carry one (an Explicit mesh); and
the eager cell holds the op's abstract result to the reference's (an FFI
call's declared result is what eval_shape reports, and nothing else checks
its dtype).

Gradients are always taken against a random cotangent (a random weighting
of each output), never sum(output): an op whose outputs sum to a constant
would otherwise compare zeros with zeros. The gradient oracle is JAX's own
autodiff of the plain-JAX reference in float64, run eagerly on the CPU device
(which every JAX has; an accelerator may lack float64 or a float64 matmul),
or the op's declared float64 gradient_oracle where that autodiff is not the
answer (NaN where the op is differentiable by design),
and the reference itself is checked against the independent float64 NumPy
oracle in test_reference.py.

Matmul precision is declared, never a platform's default (XLA's float32
matmul on NVIDIA GPUs is TensorFloat-32): float32_matmuls_not_highest lists
the float32 dots a program (and its gradient) makes at another precision than
HIGHEST, which test_conformance.py holds to none in the op and the
reference; what a kernel's own matmuls keep is the declaration's
matmul_inputs, which widens the tolerance on that platform (compare.py).
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from .cells_autodiff import check_autodiff, check_forward_batched, check_grads_cell
from .cells_control_flow import check_control_flow
from .cells_export import check_export
from .cells_hard import HARD_CASES, NONFINITE_CASES, check_hard, flushed, hard_args
from .cells_sharding import (
    _free_split,
    assert_same_shardings,
    check_grad_grad_explicit,
    check_jit_sharded,
    check_shard_map,
    check_shard_map_partial,
)
from .cells_sizes import LEADING_RANKS, cell_size, check_size
from .cells_values import check_values
from .cells_vmap import check_vmap
from .declaration import (
    COLLECTIVES,
    FORWARD_BATCHED,
    FORWARD_MODE,
    LARGE,
    MESHES,
    NEW_AXIS,
    PROGRAMS,
    REFERENCE_FACTOR,
    SIZE_KINDS,
    Arg,
    Collectives,
    OpSpec,
    Refuse,
    derived,
    in_dtype,
    refusal,
)
from .hlo import (
    NOTES,
    Matmul,
    assert_collectives,
    declared_collectives,
    float32_matmuls_not_highest,
    held_to_reference,
    matmuls,
    narrowing_matmuls,
)
from .oracles import (
    assert_grads,
    assert_outputs,
    cotangents_for,
    draw,
    ill_conditioned,
    make_args,
    operation_kinds,
    oracle,
    vjp_oracle,
)
from .results import assert_as_declared, assert_as_reference, assert_deterministic, call_as_declared
from .signature import Signature, expand_leading, parse_signature, uses_leading
from .validation import (
    DEFAULT_LEADING,
    LEADING,
    DeclarationError,
    check_declaration,
    range_axes,
    shape_of,
)

__all__ = [
    "COLLECTIVES",
    "DEFAULT_LEADING",
    "FORWARD_BATCHED",
    "FORWARD_MODE",
    "HARD_CASES",
    "LARGE",
    "LEADING",
    "LEADING_RANKS",
    "MESHES",
    "NEW_AXIS",
    "NONFINITE_CASES",
    "NOTES",
    "PROGRAMS",
    "REFERENCE_FACTOR",
    "SIZE_KINDS",
    "Arg",
    "Collectives",
    "DeclarationError",
    "Matmul",
    "OpSpec",
    "Refuse",
    "Signature",
    "assert_as_declared",
    "assert_as_reference",
    "assert_collectives",
    "assert_deterministic",
    "assert_grads",
    "assert_outputs",
    "assert_same_shardings",
    "call_as_declared",
    "cell_names",
    "cell_size",
    "check_autodiff",
    "check_control_flow",
    "check_declaration",
    "check_export",
    "check_forward_batched",
    "check_grad_grad_explicit",
    "check_grads_cell",
    "check_hard",
    "check_jit_sharded",
    "check_shard_map",
    "check_shard_map_partial",
    "check_size",
    "check_values",
    "check_vmap",
    "cotangents_for",
    "declared_collectives",
    "derived",
    "draw",
    "expand_leading",
    "float32_matmuls_not_highest",
    "flushed",
    "hard_args",
    "held_to_reference",
    "ill_conditioned",
    "in_dtype",
    "make_args",
    "matmuls",
    "narrowing_matmuls",
    "operation_kinds",
    "oracle",
    "parse_signature",
    "refusal",
    "run_cell",
    "shape_of",
    "unknown_refusals",
    "uses_leading",
    "vjp_oracle",
]


def cell_names(spec: OpSpec) -> list[str]:
    names = ["eager", "jit", "jit-donate", "vmap-new-axis"]
    several = len(spec.args) > 1
    names += [f"vmap-only-{a.name}" for a in spec.args if several]
    names += [f"vmap-only-{a.name}-inner" for a in spec.args if several and a.axes]
    names += ["vmap-mixed", "vmap-apart", "vmap-apart-reversed"] if several else []
    names += ["vmap-nested", "vmap-of-grad", "vmap-of-grad-inner"]
    names += [f"vmap-of-grad-only-{a.name}" for a in spec.args if several]
    names += ["vmap-of-grad-apart"] if several else []
    names += ["vmap-sharded-new-axis"]
    names += [f"vmap-axis-{a}" for a in spec.batch_axes]
    names += [
        f"size-{a}-{kind}" for a in spec.axes for kind in SIZE_KINDS if _sizable(spec, a, kind)
    ]
    names += [f"size-{LEADING}-{rank}" for rank in LEADING_RANKS] if uses_leading(spec) else []
    names += [f"grad-{a.name}" for a in spec.args if a.differentiable]
    names += ["vjp", "jit-grad", "jvp", "linearize", *FORWARD_BATCHED]
    names += ["check-grads-1", "check-grads-2"]
    names += ["checkpoint", "scan", "cond"]
    names += [f"hard-{c}" for c in HARD_CASES if not (spec.finite and c in NONFINITE_CASES)]
    for axis in spec.shard_map_axes:
        for mesh in MESHES:
            names += [
                f"shard-map-{axis}-{mesh}",
                f"shard-map-grad-inside-{axis}-{mesh}",
                f"shard-map-grad-outside-{axis}-{mesh}",
            ]
        names.append(f"shard-map-wrong-out-specs-{axis}")
        names.append(f"shard-map-partial-{axis}")
        names.append(f"shard-map-partial-explicit-{axis}")
        names += [f"shard-map-partial-{axis}-free-{r}" for r in _free_split(spec)]
    for axis in spec.axes:
        names += [f"jit-auto-{axis}", f"jit-explicit-{axis}", f"jit-explicit-set-mesh-{axis}"]
    pairs = spec.shard_map_axes
    names += [f"jit-auto-{a}+{b}" for i, a in enumerate(pairs) for b in pairs[i + 1 :]]
    names += [f"jit-explicit-2d-{axis}" for axis in spec.shard_map_axes]
    names += [f"grad-grad-explicit-{axis}" for axis in spec.axes]
    names += [f"grad-grad-explicit-vmap-{axis}" for axis in ("new-axis", *spec.axes)]
    names += ["export-symbolic"] if spec.symbolic_axis else []
    names += [f"lower-{platform}" for platform in spec.platforms]
    again = [
        n
        for n in names
        if any(fnmatch.fnmatchcase(n, p) for p in PER_DTYPE) and not n.startswith("grad-grad-")
    ]
    return names + [f"{n}@{d}" for d in spec.cell_dtypes[1:] for n in again]


# The cells each further dtype of `dtypes` runs again: those whose numbers the
# dtype decides (values, gradients, every size, every hard input). Batching,
# sharding, control flow, export and lowering carry those numbers unchanged,
# in any dtype: they run once, in `dtype` (a second dtype would double the
# matrix for what the values cells already see). check-grads-* computes in
# float64 whatever the dtype; grad-grad-* (second order on a mesh) once too.
PER_DTYPE = (
    "eager",
    "jit",
    "jit-grad",
    "vmap-new-axis",
    "grad-*",
    "vjp",
    "jvp",
    "size-*",
    "hard-*",
)


def _sizable(spec: OpSpec, axis: str, kind: str) -> bool:
    """Whether a size cell can draw its inputs: at size 0, no argument
    without that axis may hold indices into it (an index into an empty axis
    is no input an op can be given)."""
    if kind != "0":
        return True
    return not any(axis in range_axes(a) and axis not in a.axes for a in spec.args)


def unknown_refusals(spec: OpSpec) -> list[str]:
    """Declared refusals that name no cell (a typo would silently refuse nothing)."""
    names = cell_names(spec)
    declared = [*spec.refuse, *spec.ill_conditioned]
    return [p for p in declared if not fnmatch.filter(names, p)]


def run_cell(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """Run one cell: it matches the oracle, or raises its declared refusal.
    First, once per declaration, the reference's and the oracle's results
    against the declared outputs (check_declaration)."""
    check_declaration(spec)
    refuse = refusal(spec, cell)
    spec, base = in_dtype(spec, cell)
    if not base.startswith(f"size-{LEADING}-"):  # those cells size the leading axes
        spec = expand_leading(spec)
    check = check_shard_map if base in _plain_shard_map(spec) else _cell_function(base)
    if refuse is None:
        try:
            check(spec, base, rng)
        except AssertionError as error:
            # Every failure's first line names its cell (the checks name the rest).
            raise AssertionError(f"[{cell}] {str(error) or _bare_assert(error)}") from error
        return
    try:
        with _raises(refuse):
            check(spec, base, rng)
    except AssertionError as mismatch:
        # The declared error type, with a message the pattern does not match:
        # say what was raised (pytest's own message quotes it in a later line).
        raised = mismatch.__context__
        if raised is None or not str(mismatch).startswith("Regex pattern did not match"):
            raise
        said = (str(raised) or type(raised).__name__).splitlines()[0]
        raise AssertionError(
            f"[{cell}] raised {type(raised).__name__}: {said}, which the declared "
            f"refusal's pattern {refuse.match!r} does not match"
        ) from raised


@contextlib.contextmanager
def _raises(refuse: Refuse) -> Iterator[None]:
    """pytest.raises for the refusal's error, where a class given by name
    (a private JAX error) matches any raised class of that name or with a
    base of that name."""
    errors = refuse.error if isinstance(refuse.error, tuple) else (refuse.error,)
    names = {e for e in errors if isinstance(e, str)}
    if not names:
        with pytest.raises(refuse.error, match=refuse.match):  # type: ignore[arg-type]
            yield
        return
    classes = tuple(e for e in errors if isinstance(e, type))
    try:
        yield
    except Exception as error:
        named = {c.__name__ for c in type(error).__mro__} & names
        if not named and not isinstance(error, classes):
            raise
        if not re.search(refuse.match, str(error)):
            raise AssertionError(
                f"Regex pattern did not match.\n Regex: {refuse.match!r}\n Input: {str(error)!r}"
            ) from error
        return
    pytest.fail(f"DID NOT RAISE {' or '.join(sorted(names))}")


def _bare_assert(error: AssertionError) -> str:
    """What a failure without a message says: a bare `assert` inside JAX or
    the op (a Pallas kernel JAX cannot differentiate under vmap, say), not
    a comparison of the engine's, which always says how far off. Where it
    was raised, from the longest traceback JAX keeps (it filters its own
    frames out of the one it raises)."""
    tracebacks = [error.__traceback__, getattr(error.__cause__, "__traceback__", None)]
    frames = max((traceback.extract_tb(tb) for tb in tracebacks if tb), key=len, default=[])
    if not frames:
        return "AssertionError without a message, not a comparison"
    last = frames[-1]
    return (
        f"AssertionError without a message at {Path(last.filename).name}:{last.lineno} "
        f"({last.name}: {last.line}): an internal check of JAX or the op failed, not a comparison"
    )


def _plain_shard_map(spec: OpSpec) -> set[str]:
    """The shard-map-* cells that are not shard-map-partial-*, whatever the
    axis is named (an axis named "partial" makes shard-map-partial-1d)."""
    kinds = ("", "grad-inside-", "grad-outside-")
    names = {f"shard-map-{k}{a}-{m}" for a in spec.shard_map_axes for m in MESHES for k in kinds}
    return names | {f"shard-map-wrong-out-specs-{a}" for a in spec.shard_map_axes}


def _cell_function(cell: str) -> Callable[[OpSpec, str, np.random.Generator], None]:
    if cell in ("eager", "jit", "jit-donate"):
        return check_values
    if cell in FORWARD_BATCHED:
        return check_forward_batched
    if cell.startswith("grad-grad-explicit-"):
        return check_grad_grad_explicit
    if cell.startswith("shard-map-partial-"):
        return check_shard_map_partial
    if cell.startswith("vmap-"):
        return check_vmap
    if cell.startswith("check-grads-"):
        return check_grads_cell
    if cell.startswith("grad-") or cell in ("vjp", "jit-grad", "jvp", "linearize"):
        return check_autodiff
    if cell in ("checkpoint", "scan", "cond"):
        return check_control_flow
    if cell.startswith("hard-"):
        return check_hard
    if cell.startswith("size-"):
        return check_size
    if cell.startswith("shard-map-"):
        return check_shard_map
    if cell.startswith("jit-"):
        return check_jit_sharded
    return check_export
