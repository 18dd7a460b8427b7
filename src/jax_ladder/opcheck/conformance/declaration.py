"""The conformance matrix's declaration language: what an op's
tests/op_spec.py writes (OpSpec, its Args, the Refuse and Collectives it
declares), the constants the cells' names and sizes are made of, and what a
declaration says of one cell (its refusal, the dtype it runs in). It imports
no cell (the cells import it)."""

from __future__ import annotations

import copy
import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

from ..compare import Ulps

# isort: split
from .signature import args_and_outputs
from .validation import (
    DeclarationError,
    check_arg,
    check_collectives,
    check_refuse,
    check_spec,
    is_named,
)

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")


MESHES = {"1d": ((4,), ("x",)), "2d": ((2, 2), ("x", "y"))}  # the op's axis goes on "x"


NEW_AXIS = 2  # the size of the axes vmap, scan and the batch of vmap-of-grad add


PROGRAMS = ("forward", "gradient")  # the jit-* and shard-map-partial-* cells' programs


FORWARD_BATCHED = ("jacfwd", "vmap-jvp")  # forward mode over many tangents at once


FORWARD_MODE = ("linearize", *FORWARD_BATCHED)  # the cells besides jvp that take tangents


# size-<d>-<kind>: one axis at another size than declared, the rest as declared
SIZE_KINDS = ("0", "1", "ragged", "large")


LARGE = 4  # size-<d>-large: that many times the declared size


REFERENCE_FACTOR = 4  # OpSpec.ill_conditioned: times the reference's own error


@dataclass(frozen=True)
class Arg:
    """One positional argument: its named axes and whether it is differentiated.
    `dtype` fixes the dtype of a non-floating argument (indices, say); `sample`
    (rng, shape) -> float64 array replaces the standard normal draw, in every
    cell (the hard ones too: a mask, lengths). What the op supports of a
    floating argument, for the hard-input cells: `domain`, the closed interval
    of its values (the hard values are mapped into it: a positive-only
    argument gets their magnitudes, a bounded one is clipped and its bound
    caps the large cases), and `smallest`, the smallest nonzero magnitude
    (the tiny case starts there; 0: subnormals too).

    An integer argument declares `range`, the half-open [low, high) of its
    values, each bound an int or an axis name, "n", "n+1" or "n-1" (its size
    in the cell: an index into n is range=(0, "n")); its values are drawn
    across it, both edges included. `sorted`: drawn sorted along its last
    axis (segment ids an op may assume in order). A bool argument is drawn
    with both values, and its first two rows all False and all True (a
    fully masked row)."""

    name: str
    axes: tuple[str, ...]
    differentiable: bool = True
    dtype: str | None = None
    sample: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None
    domain: tuple[float, float] = (-math.inf, math.inf)
    smallest: float = 0.0
    range: tuple[int | str, int | str] | None = None
    sorted: bool = False

    def __post_init__(self) -> None:
        check_arg(self)  # a mistake: DeclarationError, naming the field and the fix


@dataclass(frozen=True)
class Refuse:
    """What a cell the op does not support must raise: `error` with a message
    matching the regex `match`. `error`: an exception class, or its name
    where JAX keeps it private ("ShardingTypeError"), or a tuple of them.
    `why` is the table's note (say what to use)."""

    error: type[BaseException] | str | tuple[type[BaseException] | str, ...]
    match: str
    why: str

    def __post_init__(self) -> None:
        check_refuse(self)


@dataclass(frozen=True)
class Collectives:
    """What a jit-* (or shard-map-partial-*) cell's compiled programs
    communicate where it is not the reference's: each collective's exact count
    (a COLLECTIVES name; one not named: none), in the forward program, the
    gradient program or both (None: that program is held to the reference's,
    no more of any collective, in the cells that split a shard_map axis).
    at_most=True: the counts are a budget, upper bounds (one declaration for
    every cell: extra_collectives={"*": Collectives(..., at_most=True)}).
    `why` is the table's note."""

    why: str
    forward: Mapping[str, int] | None = None
    gradient: Mapping[str, int] | None = None
    at_most: bool = False

    def __post_init__(self) -> None:
        check_collectives(self, COLLECTIVES)


@dataclass(frozen=True)
class OpSpec:
    """The declaration of an op's public signature (see tests/op_spec.py)."""

    name: str
    op: Callable[..., Any]  # the extension: arrays in, an array or a tuple of arrays out
    reference: Callable[..., Any]  # the plain-JAX reference, same signature
    # float64 NumPy, same signature, independent of both; None: the reference
    # run in float64 (independent of the op, not of the reference's formula,
    # which test_reference.py then holds to a hand-written float64 oracle)
    oracle: Callable[..., Any] | None
    # Each positional argument, and the named axes of each output; or, in one
    # line, signature="x[b,n], w[n] -> [b,n]" (signature.py), which fills them.
    # An axis list may begin with "..." (LEADING): any leading axes.
    args: tuple[Arg, ...] = ()
    outputs: tuple[tuple[str, ...], ...] = ()
    # every named axis's size in the cells (multiples of 4 shard); "...": the
    # leading axes' sizes, a tuple (default validation.DEFAULT_LEADING)
    sizes: Mapping[str, Any] = field(default_factory=dict)
    # How far the op's outputs and gradients may be from the oracle's (see
    # tests/compare.py); op_spec.py says why each count is what the op needs.
    # Required (None: a DeclarationError saying so).
    tolerance: Ulps = None  # type: ignore[assignment]
    gradient_tolerance: Ulps = None  # type: ignore[assignment]
    dtype: str = "float32"  # the dtype of the cells' floating-point arguments
    # Every dtype the op supports, where more than `dtype`: each cell also
    # runs in each other one, as <cell>@<dtype> (check-grads-* computes in
    # float64 whatever the dtype: once). Tolerances stay counted in ulps of
    # the accumulator (compare.py), so a half-precision result computed in
    # half precision, not float32, fails. None: (dtype,).
    dtypes: tuple[str, ...] | None = None
    # How far second derivatives (the grad-grad-* cells) may be from the
    # oracle's, where more than gradient_tolerance (None: that one), and why.
    second_order_tolerance: Ulps | None = None
    batch_axes: tuple[str, ...] = ()  # vmap over them: the op accepts inputs without them
    shard_map_axes: tuple[str, ...] = ()  # per shard, the op computes that shard of the output
    differentiable_outputs: tuple[int, ...] | None = None  # default: the floating ones
    symbolic_axis: str | None = None  # the axis export-symbolic makes symbolic
    platforms: Mapping[str, str] = field(default_factory=lambda: {"cpu": ""})
    export_checks: tuple[Any, ...] = ()  # export.DisabledSafetyCheck for the op's custom calls
    # What the op's float32 matmuls keep of their inputs on a platform, where
    # less than float32 (a compare.MATMUL_INPUT_BITS key): a kernel's own
    # hardware matmul, say. Every float32 dot outside a kernel is HIGHEST
    # (test_conformance.py), so no platform's default decides the results.
    matmul_inputs: Mapping[str, str] = field(default_factory=dict)
    refuse: Mapping[str, Refuse] = field(default_factory=dict)  # cell name or glob
    # The jit-* and shard-map-partial-* cells whose programs communicate
    # otherwise than the reference's, with their exact counts: cell name or
    # glob -> Collectives.
    extra_collectives: Mapping[str, Collectives] = field(default_factory=dict)
    # The entry point for jit with Auto shardings, where it differs from `op`
    # (a custom_partitioning rule, say); the jit-auto-* cells run it, and the
    # shard-map-partial-* cells (their free mesh axis is Auto).
    auto_op: Callable[..., Any] | None = None
    # float64 NumPy (*args, *cotangents) -> the gradient of each differentiable
    # argument, where autodiff of the reference is not the oracle you want:
    # where the op exists to be differentiable where the reference is not
    # (its autodiff is NaN at a norm of zero, say). None: the reference's
    # autodiff in float64.
    gradient_oracle: Callable[..., Any] | None = None
    # The platforms (a jax.Device's: cpu, gpu, tpu) where the op's results may
    # differ from one run to the next on the same inputs, and why (the order
    # of a GPU kernel's atomic adds, say). Elsewhere the eager, jit and
    # jit-grad cells run it twice and require the same bits.
    nondeterministic: Mapping[str, str] = field(default_factory=dict)
    # Cells (name or glob) -> why, where the problem itself is ill-conditioned
    # (a row of one element normalised: its gradient is the difference of
    # two nearly equal terms): there each element may also be off by
    # REFERENCE_FACTOR times the plain-JAX reference's own error against the
    # oracle, in the same dtype, so nobody clips a domain or lists a whole
    # cell as failing, and an op worse than the reference still fails.
    ill_conditioned: Mapping[str, str] = field(default_factory=dict)
    # The short form of args and outputs (signature.py), and the Arg options
    # its line has no syntax for, by argument name: {"x": dict(domain=(0, 1))}.
    # Not fields: a declaration holds the args and outputs they make.
    # The op supports finite inputs only: no hard-nonfinite or hard-masked-rows
    # cell (what that gives up: an attention's fully masked row, a NaN passed
    # through; docs/opcheck.md).
    finite: bool = False
    # The op takes no float64 (a float32 and bfloat16 kernel): check-grads-*,
    # which compute in float64 for every other op, compute in float32, at
    # float32's tolerance, instead of a refusal of each.
    float64: bool = True
    signature: InitVar[str | None] = None
    arg_options: InitVar[Mapping[str, Mapping[str, Any]] | None] = None

    def __post_init__(
        self, signature: str | None, arg_options: Mapping[str, Mapping[str, Any]] | None
    ) -> None:
        owner = f"OpSpec {self.name!r}"
        if signature is not None:
            if self.args or self.outputs:
                raise DeclarationError(
                    f"{owner}: give signature= or args= and outputs=, not both "
                    "(signature='x[b,n] -> [b,n]' fills both)"
                )
            args, outputs = args_and_outputs(owner, signature, arg_options)
            object.__setattr__(self, "args", args)
            object.__setattr__(self, "outputs", outputs)
        elif arg_options:
            raise DeclarationError(
                f"{owner}: arg_options goes with signature=; with args=, give each Arg its "
                "options (Arg('x', ('n',), domain=(0.0, math.inf)))"
            )
        if isinstance(self.dtypes, (tuple, list)) and self.dtypes and self.dtype not in self.dtypes:
            # `dtype` is the first of `dtypes` where only those were given.
            object.__setattr__(self, "dtype", self.dtypes[0])
        check_spec(self)  # every field; a mistake: DeclarationError, one line

    @property
    def cell_dtypes(self) -> tuple[str, ...]:
        """The dtypes the cells run in, `dtype` first (its cells unsuffixed)."""
        rest = [d for d in self.dtypes or () if d != self.dtype]
        return (self.dtype, *rest)

    @property
    def axes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for arg in self.args:
            seen.update(dict.fromkeys(a for a in arg.axes if is_named(a)))
        return tuple(seen)


def in_dtype(spec: OpSpec, cell: str) -> tuple[OpSpec, str]:
    """The declaration a cell runs with, and its name in the cell functions:
    <cell>@<dtype> runs <cell> with that dtype."""
    base, _, dtype = cell.partition("@")
    return (derived(spec, dtype=dtype, dtypes=None) if dtype else spec), base


def derived(spec: OpSpec, **changes: Any) -> OpSpec:
    """spec with these fields changed, not validated again: a declaration a
    cell derives (in one dtype, whose refusals of the other dtypes' cells
    then name no cell of its own)."""
    out = copy.copy(spec)
    for name, value in changes.items():
        object.__setattr__(out, name, value)
    return out


def refusal(spec: OpSpec, cell: str) -> Refuse | None:
    """The declared refusal for a cell: an exact name wins over a glob. A
    forward-mode cell with none of its own takes the jvp cell's: JAX refuses
    all forward mode of an op it refuses jvp of (a custom_vjp)."""
    if cell in spec.refuse:
        return spec.refuse[cell]
    for pattern, refuse in spec.refuse.items():
        if fnmatch.fnmatchcase(cell, pattern):
            return refuse
    base, _, dtype = cell.partition("@")
    if dtype:  # a refusal of the cell in every dtype
        return refusal(spec, base)
    if cell in FORWARD_MODE:
        return refusal(spec, "jvp")
    return None
