"""The conformance matrix: every transformation x sharding x platform cell of
an op, built from the declaration of its signature in tests/op_spec.py.

Each cell either matches the float64 oracle or raises the refusal the
declaration names (exception type and message). This file is the same in
every jax-ladder project (the kit holds the copies equal): to adapt the
starter to your own op, edit tests/op_spec.py and your op, not this file.

Cells, for an op with arguments A and named axes D:
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
                jitted values and gradient
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
matmul on NVIDIA GPUs is TensorFloat-32): float32_matmuls lists the dots a
program makes, which test_conformance.py holds to HIGHEST in the op and the
reference; what a kernel's own matmuls keep is the declaration's
matmul_inputs, which widens the tolerance on that platform (compare.py).
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from .compare import (
    PLATFORM_KINDS,
    REDUCTION,
    TRANSCENDENTAL,
    WORST,
    Ulps,
    assert_close,
    at_platform,
    platform_of,
)
from .devices import mesh_devices

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
MESHES = {"1d": ((4,), ("x",)), "2d": ((2, 2), ("x", "y"))}  # the op's axis goes on "x"
NEW_AXIS = 2  # the size of the axes vmap, scan and the batch of vmap-of-grad add
PROGRAMS = ("forward", "gradient")  # the jit-* and shard-map-partial-* cells' programs
FORWARD_BATCHED = ("jacfwd", "vmap-jvp")  # forward mode over many tangents at once
FORWARD_MODE = ("linearize", *FORWARD_BATCHED)  # the cells besides jvp that take tangents
# size-<d>-<kind>: one axis at another size than declared, the rest as declared
SIZE_KINDS = ("1", "ragged", "large")
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
    (the tiny case starts there; 0: subnormals too)."""

    name: str
    axes: tuple[str, ...]
    differentiable: bool = True
    dtype: str | None = None
    sample: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None
    domain: tuple[float, float] = (-math.inf, math.inf)
    smallest: float = 0.0


@dataclass(frozen=True)
class Refuse:
    """What a cell the op does not support must raise: `error` with a message
    matching the regex `match`. `why` is the table's note (say what to use)."""

    error: type[BaseException] | tuple[type[BaseException], ...]
    match: str
    why: str


@dataclass(frozen=True)
class Collectives:
    """What a jit-* (or shard-map-partial-*) cell's compiled programs
    communicate where it is not the reference's: each collective's exact count
    (a COLLECTIVES name; one not named: none), in the forward program, the
    gradient program or both (None: that program is held to the reference's,
    no more of any collective).
    `why` is the table's note."""

    why: str
    forward: Mapping[str, int] | None = None
    gradient: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        named = {**(self.forward or {}), **(self.gradient or {})}
        unknown = sorted(set(named) - set(COLLECTIVES))
        assert not unknown, f"not collectives: {unknown} (they are {COLLECTIVES})"
        assert self.forward is not None or self.gradient is not None, "declare a program"


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
    args: tuple[Arg, ...]
    outputs: tuple[tuple[str, ...], ...]  # the named axes of each output
    sizes: Mapping[str, int]  # every named axis's size in the cells (multiples of 4 shard)
    # How far the op's outputs and gradients may be from the oracle's (see
    # tests/compare.py); op_spec.py says why each count is what the op needs.
    tolerance: Ulps
    gradient_tolerance: Ulps
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

    def __post_init__(self) -> None:
        if self.dtypes is not None and self.dtype not in self.dtypes:
            # `dtype` is the first of `dtypes` where only those were given.
            object.__setattr__(self, "dtype", self.dtypes[0])

    @property
    def cell_dtypes(self) -> tuple[str, ...]:
        """The dtypes the cells run in, `dtype` first (its cells unsuffixed)."""
        rest = [d for d in self.dtypes or () if d != self.dtype]
        return (self.dtype, *rest)

    @property
    def axes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for arg in self.args:
            seen.update(dict.fromkeys(arg.axes))
        return tuple(seen)


# --- The cells' names, and what the declaration says of each ------------------
def cell_names(spec: OpSpec) -> list[str]:
    names = ["eager", "jit", "jit-donate", "vmap-new-axis"]
    several = len(spec.args) > 1
    names += [f"vmap-only-{a.name}" for a in spec.args if several]
    names += ["vmap-mixed"] if several else []
    names += ["vmap-nested", "vmap-of-grad", "vmap-of-grad-inner"]
    names += [f"vmap-of-grad-only-{a.name}" for a in spec.args if several]
    names += ["vmap-sharded-new-axis"]
    names += [f"vmap-axis-{a}" for a in spec.batch_axes]
    names += [f"size-{a}-{kind}" for a in spec.axes for kind in SIZE_KINDS]
    names += [f"grad-{a.name}" for a in spec.args if a.differentiable]
    names += ["vjp", "jit-grad", "jvp", "linearize", *FORWARD_BATCHED]
    names += ["check-grads-1", "check-grads-2"]
    names += ["checkpoint", "scan", "cond"]
    names += [f"hard-{case}" for case in HARD_CASES]
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
    once = [n for n in names if not n.startswith("check-grads-")]
    return names + [f"{n}@{d}" for d in spec.cell_dtypes[1:] for n in once]


def in_dtype(spec: OpSpec, cell: str) -> tuple[OpSpec, str]:
    """The declaration a cell runs with, and its name in the cell functions:
    <cell>@<dtype> runs <cell> with that dtype."""
    base, _, dtype = cell.partition("@")
    return (replace(spec, dtype=dtype, dtypes=None) if dtype else spec), base


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


def unknown_refusals(spec: OpSpec) -> list[str]:
    """Declared refusals that name no cell (a typo would silently refuse nothing)."""
    names = cell_names(spec)
    declared = [*spec.refuse, *spec.ill_conditioned]
    return [p for p in declared if not fnmatch.filter(names, p)]


def run_cell(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """Run one cell: it matches the oracle, or raises its declared refusal."""
    refuse = refusal(spec, cell)
    spec, base = in_dtype(spec, cell)
    check = _cell_function(base)
    if refuse is None:
        try:
            check(spec, base, rng)
        except AssertionError as error:
            # Every failure's first line names its cell (the checks name the rest).
            raise AssertionError(f"[{cell}] {error}") from error
        return
    with pytest.raises(refuse.error, match=refuse.match):
        check(spec, base, rng)


# --- Inputs, oracles and comparisons -------------------------------------------
def _shape(spec: OpSpec, axes: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(spec.sizes[a] for a in axes)


def _float(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def draw(arg: Arg, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """An argument's values: its own sample, else standard normals mapped
    into its domain (magnitudes for a positive-only one, clipped to a
    bounded one) and held to its smallest nonzero magnitude."""
    if arg.sample is not None:
        return np.asarray(arg.sample(rng, tuple(shape)))
    return _into_domain(arg, rng.standard_normal(shape))


def _into_domain(arg: Arg, values: np.ndarray) -> np.ndarray:
    low, high = arg.domain
    if low >= 0:
        values = np.abs(values)
    elif high <= 0:
        values = -np.abs(values)
    if arg.smallest > 0:
        small = (values != 0) & (np.abs(values) < arg.smallest)
        values = np.where(small, np.copysign(arg.smallest, values), values)
    return np.clip(values, low, high)


def make_args(
    spec: OpSpec,
    rng: np.random.Generator,
    dtype: str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> list[Any]:
    """Random arguments, as JAX arrays of the cell's dtype (sizes: the axes'
    sizes where not the declared ones)."""
    sizes = {**spec.sizes, **(sizes or {})}
    out = []
    for arg in spec.args:
        values = draw(arg, tuple(sizes[a] for a in arg.axes), rng)
        out.append(jnp.asarray(values, arg.dtype or dtype or spec.dtype))
    return out


def _outputs(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _diff_outputs(spec: OpSpec, outputs: tuple[Any, ...]) -> list[int]:
    if spec.differentiable_outputs is not None:
        return list(spec.differentiable_outputs)
    return [i for i, o in enumerate(outputs) if _float(o.dtype)]


def _diff_args(spec: OpSpec) -> list[int]:
    return [i for i, a in enumerate(spec.args) if a.differentiable]


def oracle(spec: OpSpec, args: list[Any]) -> tuple[np.ndarray, ...]:
    """The float64 oracle on exactly the values the op sees: the declared one,
    or else the reference itself computing in float64 on the CPU."""
    if spec.oracle is None:
        with jax.default_device(_CPU):
            outputs = _outputs(spec.reference(*(_to64(a) for a in args)))
        return tuple(np.asarray(o) for o in outputs)
    as64 = [np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a) for a in args]
    return _outputs(spec.oracle(*as64))


# Where the oracle computes: every JAX has a CPU device, with float64 and its
# matmuls (a TPU has no float64, a GPU's float64 is slow).
_CPU = jax.devices("cpu")[0]


def _to64(a: Any) -> Any:
    """a as a float64 array (non-floating ones as they are) on the CPU: the
    conversion happens on the host, not on the accelerator holding a."""
    host = np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a)
    return jax.device_put(host, _CPU)


def _loss(spec: OpSpec, fn: Callable[..., Any], cotangents: list[Any]) -> Callable[..., Any]:
    """sum over the differentiable outputs of cotangent * output, as a function
    of the differentiable arguments (the others fixed by the caller)."""

    def loss(*outputs: Any) -> Any:
        picked = _diff_outputs(spec, outputs)
        return sum(jnp.sum(c * outputs[i]) for c, i in zip(cotangents, picked, strict=True))

    return lambda *a: loss(*_outputs(fn(*a)))


def cotangents_for(
    spec: OpSpec, args: list[Any], rng: np.random.Generator, fn: Callable[..., Any] | None = None
) -> list[Any]:
    """Random cotangents for the differentiable outputs of fn (the op) on args."""
    outs = _outputs(jax.eval_shape(fn or spec.op, *args))
    return [
        jnp.asarray(rng.standard_normal(outs[i].shape), outs[i].dtype)
        for i in _diff_outputs(spec, outs)
    ]


def vjp_oracle(spec: OpSpec, args: list[Any], cotangents: list[Any]) -> list[np.ndarray]:
    """Gradients of the random weighting of the outputs, with respect to each
    differentiable argument: the declared gradient oracle, or else autodiff of
    the reference in float64, eagerly."""
    if spec.gradient_oracle is not None:
        as64 = [np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a) for a in args]
        cts = [np.asarray(c, np.float64) for c in cotangents]
        return [np.asarray(g) for g in spec.gradient_oracle(*as64, *cts)]
    args64 = [_to64(a) for a in args]
    cts64 = [_to64(c) for c in cotangents]
    argnums = tuple(_diff_args(spec))
    with jax.default_device(_CPU):
        grads = jax.grad(_loss(spec, spec.reference, cts64), argnums=argnums)(*args64)
    return [np.asarray(g) for g in grads]


def assert_outputs(
    spec: OpSpec,
    got: Any,
    want: tuple[Any, ...],
    where: str = "",
    inputs: list[Any] | None = None,
    batched: list[Any] | None = None,
    reference: Any = None,
) -> None:
    """The op's outputs against the oracle's, within its tolerance. where:
    what computed them (jit, vmap, ...), for a failure's message; inputs: the
    op's arguments, where got is its unbatched result (a failure then names
    the inputs at the worst element); batched: the arguments, where got is a
    batched result (their scale is an all-zero oracle's: compare.py);
    reference: the reference's own results, in an ill_conditioned cell."""
    got = _outputs(got)
    assert len(got) == len(want), f"{where}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        tolerance = at_platform(spec.tolerance, spec.matmul_inputs, platform_of(g))
        axes = spec.outputs[k] if k < len(spec.outputs) else ()
        at = _inputs_at(spec, inputs, axes)
        said = _said(where, f"output {k}")
        scale, also = _scale(inputs or batched), _reference_error(reference, k, w)
        kinds = operation_kinds(spec) if platform_of(g) in _PARTLY_IEEE else None
        assert_close(g, w, tolerance, where=said, inputs_at=at, scale=scale, also=also, kinds=kinds)


def assert_grads(
    spec: OpSpec,
    got: Any,
    want: list[np.ndarray],
    where: str = "",
    inputs: list[Any] | None = None,
    of: list[str] | None = None,
    batched: list[Any] | None = None,
    reference: Any = None,
) -> None:
    """Gradients against the oracle's, within the gradient tolerance: one per
    differentiable argument (or per name in `of`), else (tangents, second
    orders) results counted in order. where and inputs: as assert_outputs."""
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want), f"{where}: {len(got)} gradients, expected {len(want)}"
    names = of or [spec.args[i].name for i in _diff_args(spec)]
    if len(names) != len(got):
        names = []
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        tolerance = at_platform(spec.gradient_tolerance, spec.matmul_inputs, platform_of(g))
        if names:
            what = f"gradient of {names[k]}"
            axes = next(a.axes for a in spec.args if a.name == names[k])
        else:
            what, axes = f"result {k}", ()
        at = _inputs_at(spec, inputs if names else None, axes)
        said = _said(where, what)
        scale, also = _scale(inputs or batched), _reference_error(reference, k, w)
        kinds = operation_kinds(spec) if platform_of(g) in _PARTLY_IEEE else None
        assert_close(g, w, tolerance, where=said, inputs_at=at, scale=scale, also=also, kinds=kinds)


_KINDS: dict[Any, frozenset[str]] = {}
_PARTLY_IEEE = {platform for platform, _ in PLATFORM_KINDS}  # where kinds matter


def operation_kinds(spec: OpSpec) -> frozenset[str] | None:
    """The kinds of operation (compare.TRANSCENDENTAL, REDUCTION) in the op's
    programs, forward and gradient, kernels and custom rules included, read
    from their jaxprs at the declared sizes: what a platform whose arithmetic
    is IEEE's for some kinds only widens a comparison for
    (compare.PLATFORM_KINDS). None where they cannot be read (then every
    kind is assumed)."""
    key = spec.op
    if key not in _KINDS:
        try:
            args = make_args(spec, np.random.default_rng(0))
            cts = cotangents_for(spec, args, np.random.default_rng(1))
            programs = [jax.make_jaxpr(spec.op)(*args)]
            diff = _diff_args(spec)
            if diff and refusal(spec, "vjp") is None:
                # The pullback alone: the gradient's own operations, not the loss's sum.
                of_diff = _of_diff(spec, spec.op, args)
                _, pullback = jax.vjp(of_diff, *(args[i] for i in diff))
                programs.append(jax.make_jaxpr(pullback)(tuple(cts)))
            names = set().union(*(_primitives(p.jaxpr) for p in programs))
        except Exception:  # a program that cannot be traced here: any kind
            return None
        found = {"transcendental"} if names & TRANSCENDENTAL else set()
        found |= {"reduction"} if names & REDUCTION else set()
        _KINDS[key] = frozenset(found)
    return _KINDS[key]


def _primitives(jaxpr: Any) -> set[str]:
    """Every primitive's name in a jaxpr and in the jaxprs its equations
    hold (jit, custom rules, control flow, Pallas kernels)."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's
                if hasattr(inner, "eqns"):
                    names |= _primitives(inner)
    return names


def _reference_error(reference: Any, k: int, want: Any) -> np.ndarray | None:
    """REFERENCE_FACTOR times the reference's own error in its k-th result
    (None: no reference given). Where both are non-finite the comparison's
    own rule holds."""
    if reference is None:
        return None
    ref = np.asarray(jax.tree.leaves(reference)[k], np.float64)
    error = np.abs(ref - np.asarray(want, np.float64))
    return REFERENCE_FACTOR * np.where(np.isfinite(error), error, 0.0)


def ill_conditioned(spec: OpSpec, cell: str) -> str | None:
    """Why a cell is declared ill-conditioned (OpSpec.ill_conditioned), or None."""
    return next(
        (
            why
            for pattern, why in spec.ill_conditioned.items()
            if fnmatch.fnmatchcase(cell, pattern)
        ),
        None,
    )


def _scale(inputs: list[Any] | None) -> float:
    """The largest finite |value| of the floating inputs: the size of the
    terms an exactly-zero result cancelled (compare.assert_close's scale)."""
    sizes = [
        float(np.max(np.abs(v), initial=0.0, where=np.isfinite(v)))
        for v in (np.asarray(a, np.float64) for a in inputs or () if _float(a.dtype))
    ]
    return max(sizes, default=0.0)


def _said(where: str, what: str) -> str:
    return f"{where}, {what}" if where else what


def _inputs_at(
    spec: OpSpec, inputs: list[Any] | None, axes: tuple[str, ...]
) -> Callable[[tuple[int, ...]], str] | None:
    """For a result with named `axes` (an output's, an argument's gradient), a
    function from an element's index to the inputs that produced it: each
    argument's value where the index fixes all its axes (an elementwise op),
    else which slice of it (a row, the whole argument)."""
    if inputs is None:
        return None

    def at(index: tuple[int, ...]) -> str:
        if len(index) != len(axes):
            return ""
        fixed = dict(zip(axes, index, strict=True))
        said = []
        for arg, value in zip(spec.args, inputs, strict=True):
            if all(d in fixed for d in arg.axes):
                v = np.asarray(value)[tuple(fixed[d] for d in arg.axes)]
                said.append(f"{arg.name} = {v.item() if v.dtype.kind in 'biu' else float(v)!r}")
            else:
                where = ", ".join(str(fixed[d]) if d in fixed else ":" for d in arg.axes)
                said.append(f"{arg.name}[{where}]")
        return ", ".join(said)

    return at


def _stack(parts: list[tuple[np.ndarray, ...]], axis: int | tuple[int, ...]) -> tuple[Any, ...]:
    """Each output's slices stacked along `axis` (one for all, or each output's)."""
    axes = axis if isinstance(axis, tuple) else (axis,) * len(parts[0])
    return tuple(
        np.stack(outs, axis=a) for outs, a in zip(zip(*parts, strict=True), axes, strict=True)
    )


def _grad(spec: OpSpec, fn: Callable[..., Any], cotangents: list[Any]) -> Callable[..., Any]:
    """The gradient with respect to the differentiable arguments, as a function of all."""
    return jax.grad(_loss(spec, fn, cotangents), argnums=tuple(_diff_args(spec)))


# --- Abstract results, determinism ----------------------------------------------
def call_as_declared(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), its results held to the abstract result jax.eval_shape
    gives for the same call (assert_as_declared). Under jit the two agree by
    construction; eagerly they need not: an op that computes on the host
    outside a trace (a float64 NumPy result where float32 is declared, which
    the comparison with the float64 oracle would accept), or dispatches
    otherwise than it traces."""
    got = fn(*args)
    assert_as_declared(got, jax.eval_shape(fn, *args))
    return got


def assert_as_declared(got: Any, declared: Any, where: str = "") -> None:
    """Each result has its declared (eval_shape's) shape and dtype, and, where
    the types carry a sharding (an Explicit mesh) and the result is placed
    with a NamedSharding, that sharding."""
    prefix = f"{where}: " if where else ""
    got_leaves, structure = jax.tree.flatten(got)
    declared_leaves, declared_structure = jax.tree.flatten(declared)
    assert structure == declared_structure, (
        f"{prefix}results {structure}, the abstract result (jax.eval_shape) {declared_structure}"
    )
    for k, (g, d) in enumerate(zip(got_leaves, declared_leaves, strict=True)):
        computed = (tuple(np.shape(g)), jnp.dtype(getattr(g, "dtype", np.asarray(g).dtype)))
        assert computed == (tuple(d.shape), jnp.dtype(d.dtype)), (
            f"{prefix}result {k}: computed {computed[1]}{list(computed[0])}, but its abstract "
            f"result (jax.eval_shape of the same call) is {jnp.dtype(d.dtype)}{list(d.shape)}"
        )
        typed = getattr(d, "sharding", None)
        placed = getattr(g, "sharding", None)
        if isinstance(typed, NamedSharding) and isinstance(placed, NamedSharding):
            same = placed.mesh.shape_tuple == typed.mesh.shape_tuple and (
                placed.is_equivalent_to(NamedSharding(placed.mesh, typed.spec), g.ndim)
            )
            assert same, (
                f"{prefix}result {k}: placed {placed.spec} on {dict(placed.mesh.shape)}, but "
                f"typed {typed.spec} on {dict(typed.mesh.shape)} (jax.eval_shape)"
            )


def assert_as_reference(spec: OpSpec, args: list[Any]) -> None:
    """The op's abstract result (what an FFI call declares in its
    result_shape_dtypes, which XLA takes on trust) is the reference's: each
    output's shape and dtype. The value cells see a wrong shape (the oracle's
    differs); a narrower dtype they would accept, counting its ulps."""
    mine = [(tuple(o.shape), jnp.dtype(o.dtype)) for o in _outputs(jax.eval_shape(spec.op, *args))]
    theirs = [
        (tuple(o.shape), jnp.dtype(o.dtype))
        for o in _outputs(jax.eval_shape(spec.reference, *args))
    ]
    assert mine == theirs, (
        "the op's abstract result (jax.eval_shape) "
        f"{[f'{d}{list(s)}' for s, d in mine]} is not the reference's "
        f"{[f'{d}{list(s)}' for s, d in theirs]}"
    )


def assert_deterministic(spec: OpSpec, first: Any, second: Any, where: str) -> None:
    """Two runs on the same inputs give the same bits, unless the declaration
    says the op is nondeterministic on the platform that computed them."""
    leaves = jax.tree.leaves(first)
    platform = platform_of(leaves[0]) if leaves else "cpu"
    if platform in spec.nondeterministic:
        return
    for k, (a, b) in enumerate(zip(leaves, jax.tree.leaves(second), strict=True)):
        # Bits, not values: NaN == NaN and -0.0 != 0.0 here.
        size = np.size(a)
        if not size:
            continue
        a, b = (np.asarray(x).reshape(-1).view(np.uint8).reshape(size, -1) for x in (a, b))
        differ = int(np.count_nonzero((a != b).any(axis=1)))
        assert not differ, (
            f"{where}, result {k}: {differ} of {size} elements differ between two runs on the "
            f"same inputs on {platform} (declare OpSpec.nondeterministic[{platform!r}], and why, "
            "if the op is nondeterministic there)"
        )


def _assert_none_consumed(where: str, inputs: list[Any]) -> None:
    """No input deleted: an op that donates its arguments internally (a jit
    with donate_argnums inside it) deletes its caller's arrays."""
    gone = [i for i, a in enumerate(inputs) if a.is_deleted()]
    assert not gone, f"{where}: arguments {gone} consumed (deleted), though not donated"


# --- Values --------------------------------------------------------------------
def check_values(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """eager and jit: against the oracle, twice (the same bits both times,
    and no argument consumed); eager also holds the op's abstract result to
    the reference's.

    jit-donate: every argument donated, the program compiled with its
    arguments kept (so that its parameters are the arguments, in order). The
    donated arguments consumed (deleted) must be exactly those the compiled
    program aliases to an output (its input_output_alias): a buffer consumed
    but not aliased was freed for nothing, one aliased but not consumed
    would be overwritten while the caller holds it. Which donations XLA
    takes is its choice, read here, not predicted: JAX pairs a donated
    argument with an output of its shape and dtype, and hands XLA the others
    whose size matches one (a transposed or reshaped result). The outputs,
    written over the donated buffers, still match the oracle."""
    args = make_args(spec, rng)
    want = oracle(spec, args)
    if cell in ("eager", "jit"):
        if cell == "eager":
            assert_as_reference(spec, args)
        fn = spec.op if cell == "eager" else jax.jit(spec.op)
        got = call_as_declared(fn, *args)
        _assert_none_consumed(cell, args)
        assert_outputs(spec, got, want, cell, args)
        assert_deterministic(spec, got, fn(*args), cell)
        return
    # jit-donate: the op may be handed buffers it can overwrite
    donated = [jnp.array(a, copy=True) for a in args]
    program = jax.jit(spec.op, donate_argnums=tuple(range(len(args))), keep_unused=True)
    with warnings.catch_warnings():  # an input no output matches is not usable
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        compiled = program.lower(*donated).compile()
    got = compiled(*donated)
    assert_as_declared(got, jax.eval_shape(program, *args), "jit, donated")
    assert_outputs(spec, got, want, "jit, donated", args)
    aliased = _aliased(compiled.as_text())
    consumed = {i for i, a in enumerate(donated) if a.is_deleted()}
    assert consumed == set(aliased), (
        f"jit, donated: arguments {sorted(consumed)} consumed, but the compiled program "
        f"aliases arguments {sorted(aliased)} to outputs (input_output_alias)"
    )


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


# --- vmap ------------------------------------------------------------------------
def _insert(a: Any, axis: int, size: int, rng: np.random.Generator, arg: Arg | None = None) -> Any:
    """a with a new axis of `size` at `axis`: a itself as the first slice, the
    others drawn as the argument `arg` declares (its sample, domain and
    smallest; a recording replays its values, permuted where a slice would
    repeat one exactly). Without `arg`, standard normals (tangents,
    cotangents) or, for a non-floating array, copies of a."""
    if arg is None and not _float(a.dtype):
        return jnp.stack([a] * size, axis=axis)
    first = np.asarray(a)
    slices = [first]
    for _ in range(size - 1):
        values = draw(arg, first.shape, rng) if arg else rng.standard_normal(first.shape)
        if arg is not None and np.array_equal(values, first):
            values = rng.permuted(np.asarray(values).reshape(-1)).reshape(first.shape)
        slices.append(np.asarray(values))
    return jnp.asarray(np.stack(slices, axis=axis), a.dtype)


def _batched(
    spec: OpSpec, args: list[Any], in_axes: list[int | None], size: int, rng: Any
) -> list[Any]:
    """Each argument with a new axis of `size` at its in_axes (None: as it is)."""
    return [
        a if ax is None else _insert(a, ax, size, rng, arg)
        for a, ax, arg in zip(args, in_axes, spec.args, strict=True)
    ]


def _slice(batched: list[Any], in_axes: list[int | None], i: int) -> list[Any]:
    return [
        b if ax is None else jnp.take(b, i, axis=ax) for b, ax in zip(batched, in_axes, strict=True)
    ]


def _mixed_axes(args: list[Any]) -> list[int | None]:
    """Each argument batched otherwise: its last axis, none, its first, in
    turn (the first argument on a non-leading axis wherever it has one)."""
    pattern = [lambda a: a.ndim, lambda a: None, lambda a: 0]
    return [pattern[i % 3](a) for i, a in enumerate(args)]


def check_vmap(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """A batching rule receives, across these cells, every pattern: all
    arguments batched (vmap-new-axis: on a non-leading axis, out last; vmap-
    nested), each one alone (vmap-only-<arg>), mixed axes with some
    unbatched (vmap-mixed, out on a non-leading axis), and the gradient's
    rules the same ways (vmap-of-grad leading, vmap-of-grad-inner on a
    non-leading axis, vmap-of-grad-only-<arg>)."""
    args = make_args(spec, rng)
    if cell == "vmap-new-axis":
        # The batch axis second where the argument has an axis (in_axes 1),
        # and last in the output (out_axes -1).
        _check_batched(
            spec, args, [min(1, a.ndim) for a in args], -1, rng, "vmap, batch axis 1 in, last out"
        )
    elif cell == "vmap-mixed":
        _check_batched(
            spec, args, _mixed_axes(args), 1, rng, "vmap, mixed in_axes, batch axis 1 out"
        )
    elif cell.startswith("vmap-only-"):
        name = cell.removeprefix("vmap-only-")
        in_axes = [0 if a.name == name else None for a in spec.args]
        _check_batched(spec, args, in_axes, 0, rng, f"vmap of {name} alone")
    elif cell == "vmap-nested":
        # Outer axis first, inner axis last: two batching rules composed.
        inner = [_insert(a, a.ndim, 2, rng, arg) for a, arg in zip(args, spec.args, strict=True)]
        batched = [
            _insert(a, 0, NEW_AXIS, rng, arg) for a, arg in zip(inner, spec.args, strict=True)
        ]
        last = [a.ndim - 1 for a in batched]  # inside the outer vmap, the axis is still last
        fn = jax.vmap(jax.vmap(spec.op, in_axes=[a - 1 for a in last]), in_axes=0)
        got = call_as_declared(fn, *batched)
        parts = [
            _stack([oracle(spec, [b[i][..., j] for b in batched]) for j in range(2)], axis=0)
            for i in range(NEW_AXIS)
        ]
        assert_outputs(spec, got, _stack(parts, axis=0), "vmap(vmap), outer axis first")
    elif cell.startswith("vmap-of-grad"):
        _check_vmap_of_grad(spec, cell, args, rng)
    elif cell == "vmap-sharded-new-axis":
        _check_vmap_sharded(spec, rng)
    else:  # vmap-axis-<d>: vmap over one of the op's own batch axes
        axis = cell.removeprefix("vmap-axis-")
        in_axes = [a.axes.index(axis) if axis in a.axes else None for a in spec.args]
        out_axes = [o.index(axis) if axis in o else None for o in spec.outputs]
        out = out_axes[0] if len(out_axes) == 1 else tuple(out_axes)
        got = call_as_declared(jax.vmap(spec.op, in_axes=in_axes, out_axes=out), *args)
        assert_outputs(spec, got, oracle(spec, args), f"vmap over {axis}", args)


def _out_axis(out_axes: int, outputs: tuple[Any, ...]) -> Any:
    """out_axes for each output: `out_axes` where it has an axis to put the
    batch after (0 for a scalar)."""
    each = [out_axes if (o.ndim or out_axes == -1) else 0 for o in outputs]
    return each[0] if len(each) == 1 else tuple(each)


def _check_batched(
    spec: OpSpec, args: list[Any], in_axes: list[int | None], out_axes: int, rng: Any, where: str
) -> None:
    """vmap of the op with these in_axes and out_axes, against the oracle of each slice."""
    batched = _batched(spec, args, in_axes, NEW_AXIS, rng)
    outs = _outputs(jax.eval_shape(spec.op, *args))
    out = _out_axis(out_axes, outs)
    got = call_as_declared(jax.vmap(spec.op, in_axes=in_axes, out_axes=out), *batched)
    parts = [oracle(spec, _slice(batched, in_axes, i)) for i in range(NEW_AXIS)]
    assert_outputs(spec, got, _stack(parts, out), where, batched=batched)


def _check_vmap_of_grad(spec: OpSpec, cell: str, args: list[Any], rng: Any) -> None:
    """vmap of the gradient against random cotangents: every argument and
    cotangent batched first (vmap-of-grad), on a non-leading axis with the
    gradients' batch axis last (vmap-of-grad-inner), or one argument alone
    with the cotangents (vmap-of-grad-only-<arg>): the batching rules of
    the op's backward see each pattern its forward's do."""
    if cell == "vmap-of-grad":
        in_axes, out_axes, where = [0] * len(args), 0, "jit(vmap(grad)), batch axis first"
    elif cell == "vmap-of-grad-inner":
        in_axes = [min(1, a.ndim) for a in args]
        out_axes, where = -1, "jit(vmap(grad)), batch axis 1 in, last out"
    else:
        name = cell.removeprefix("vmap-of-grad-only-")
        in_axes = [0 if a.name == name else None for a in spec.args]
        out_axes, where = 0, f"jit(vmap(grad)) of {name} alone (and the cotangents)"
    batched = _batched(spec, args, in_axes, NEW_AXIS, rng)
    slices = [_slice(batched, in_axes, i) for i in range(NEW_AXIS)]
    cts = [cotangents_for(spec, s, rng) for s in slices]
    ct_axes = [min(1, c.ndim) if cell == "vmap-of-grad-inner" else 0 for c in cts[0]]
    stacked_cts = [jnp.stack([c[k] for c in cts], axis=ax) for k, ax in enumerate(ct_axes)]

    def per_slice(args: list[Any], cts: list[Any]) -> Any:
        return _grad(spec, spec.op, cts)(*args)

    mapped = jax.vmap(per_slice, in_axes=(in_axes, ct_axes), out_axes=out_axes)
    got = call_as_declared(jax.jit(mapped), batched, stacked_cts)
    wants = [vjp_oracle(spec, s, c) for s, c in zip(slices, cts, strict=True)]
    want = [np.stack(w, axis=out_axes % (np.ndim(w[0]) + 1)) for w in zip(*wants, strict=True)]
    assert_grads(spec, got, want, where, batched=batched)


def _check_vmap_sharded(spec: OpSpec, rng: np.random.Generator) -> None:
    """A new leading axis, one slice per device of an explicit mesh: every
    batching rule sees operands typed as split along the axis it adds, and
    the gradient's cotangents arrive split the same way."""
    mesh = _mesh("1d", AxisType.Explicit)
    size = mesh.shape["x"]
    batched = _batched(spec, make_args(spec, rng), [0] * len(spec.args), size, rng)
    slices = [[b[i] for b in batched] for i in range(size)]
    cts = [cotangents_for(spec, s, rng) for s in slices]
    want = _stack([oracle(spec, s) for s in slices], axis=0)
    wants = [vjp_oracle(spec, s, c) for s, c in zip(slices, cts, strict=True)]
    split = NamedSharding(mesh, P("x"))
    placed = [jax.device_put(b, split) for b in batched]
    ct_placed = [jax.device_put(jnp.stack(c), split) for c in zip(*cts, strict=True)]
    mapped = jax.vmap(spec.op)
    got = call_as_declared(jax.jit(mapped), *placed)
    assert_outputs(spec, got, want, "jit(vmap), batch axis first")
    assert_same_shardings(got, jax.vmap(spec.reference), placed)
    got_grads = call_as_declared(jax.jit(_grad_of(spec, mapped, len(placed))), *placed, *ct_placed)
    want_grads = [np.stack(w) for w in zip(*wants, strict=True)]
    assert_grads(spec, got_grads, want_grads, "jit(grad(vmap)), batch axis first")


# --- Sizes ------------------------------------------------------------------------
def cell_size(spec: OpSpec, axis: str, kind: str) -> int:
    """The size a size-<axis>-<kind> cell gives the axis: 1; ragged, the
    smallest prime above the declared size and 4 (a multiple of no block the
    declared size suggests, nor of any mesh's shard count); large, LARGE
    times the declared size."""
    declared = spec.sizes[axis]
    if kind == "1":
        return 1
    if kind == "large":
        return LARGE * declared
    candidate = max(declared, 4) + 1
    while any(candidate % d == 0 for d in range(2, math.isqrt(candidate) + 1)):
        candidate += 1
    return candidate


def check_size(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """One axis at size 1, at a ragged size or at several times its declared
    size (a kernel's grid rounding down leaves a ragged tail unwritten; a row
    of one takes another path): jitted values and gradient against the oracle."""
    axis, kind = cell.removeprefix("size-").rsplit("-", 1)
    size = cell_size(spec, axis, kind)
    args = make_args(spec, rng, sizes={axis: size})
    where = f"{axis} = {size}"
    hard = ill_conditioned(spec, cell) is not None
    got = call_as_declared(jax.jit(spec.op), *args)
    ref = _outputs(jax.jit(spec.reference)(*args)) if hard else None
    assert_outputs(spec, got, oracle(spec, args), f"jit, {where}", args, reference=ref)
    if _diff_args(spec):
        cts = cotangents_for(spec, args, rng)
        grads = call_as_declared(jax.jit(_grad(spec, spec.op, cts)), *args)
        ref = jax.jit(_grad(spec, spec.reference, cts))(*args) if hard else None
        want = vjp_oracle(spec, args, cts)
        assert_grads(spec, grads, want, f"jit(grad), {where}", args, reference=ref)


# --- Autodiff ----------------------------------------------------------------------
def check_autodiff(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    args = make_args(spec, rng)
    cts = cotangents_for(spec, args, rng)
    want = vjp_oracle(spec, args, cts)
    diff = _diff_args(spec)
    if cell.startswith("grad-"):
        name = cell.removeprefix("grad-")
        i = [a.name for a in spec.args].index(name)
        got = call_as_declared(jax.grad(_loss(spec, spec.op, cts), argnums=i), *args)
        assert_grads(spec, [got], [want[diff.index(i)]], "grad", args, of=[name])
    elif cell == "jit-grad":
        gradient = jax.jit(_grad(spec, spec.op, cts))
        got = call_as_declared(gradient, *args)
        assert_grads(spec, got, want, "jit(grad)", args)
        assert_deterministic(spec, got, gradient(*args), "jit(grad)")
    elif cell == "vjp":

        def pullback(*args: Any) -> Any:
            _, vjp = jax.vjp(_of_diff(spec, spec.op, list(args)), *(args[i] for i in diff))
            return vjp(tuple(cts))

        assert_grads(spec, call_as_declared(jax.jit(pullback), *args), want, "jit(vjp)", args)
    else:  # jvp, linearize: forward mode, against the reference's in float64
        tangents = [jnp.asarray(rng.standard_normal(args[i].shape), args[i].dtype) for i in diff]
        of_diff = partial(_of_diff, spec)
        primals = [args[i] for i in diff]
        args64 = [_to64(a) for a in args]
        with jax.default_device(_CPU):
            _, want_t = jax.jvp(
                of_diff(spec.reference, args64),
                [args64[i] for i in diff],
                [_to64(t) for t in tangents],
            )
        if cell == "jvp":
            jvp = jax.jit(lambda p, t: jax.jvp(of_diff(spec.op, args), p, t))
            _, got_t = call_as_declared(jvp, primals, tangents)
        else:
            _, linear = jax.linearize(of_diff(spec.op, args), *primals)
            got_t = call_as_declared(linear, *tangents)
        where = "jit(jvp)" if cell == "jvp" else "linearize"
        _assert_tangents(spec, list(got_t), [np.asarray(w) for w in want_t], where, args)


def _assert_tangents(
    spec: OpSpec, got: list[Any], want: list[np.ndarray], where: str, inputs: list[Any]
) -> None:
    """Tangents of the differentiable outputs, within the gradient tolerance."""
    picked = _diff_outputs(spec, _outputs(jax.eval_shape(spec.op, *inputs)))
    assert len(got) == len(want), f"{where}: {len(got)} tangents, expected {len(want)}"
    for k, g, w in zip(picked, got, want, strict=True):
        tolerance = at_platform(spec.gradient_tolerance, spec.matmul_inputs, platform_of(g))
        at = _inputs_at(spec, inputs, spec.outputs[k])
        assert_close(g, w, tolerance, where=f"{where}, tangent of output {k}", inputs_at=at)


def _of_diff(spec: OpSpec, fn: Callable[..., Any], fixed: list[Any]) -> Callable[..., Any]:
    """fn as a function of the differentiable arguments alone (the others as
    in `fixed`), returning its differentiable outputs."""
    diff = _diff_args(spec)

    def of_diff(*d: Any) -> tuple[Any, ...]:
        full = list(fixed)
        for i, v in zip(diff, d, strict=True):
            full[i] = v
        outs = _outputs(fn(*full))
        return tuple(outs[i] for i in _diff_outputs(spec, outs))

    return of_diff


def check_forward_batched(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """Forward mode over many tangents in one jitted program, against the
    reference's own in float64: jacfwd (a tangent per input element, which
    JAX batches with vmap) and vmap of jvp over NEW_AXIS random tangents.
    The batching rules of the op's tangent computation run here, which the
    jvp cell never calls."""
    args = make_args(spec, rng)
    args64 = [_to64(a) for a in args]
    diff = _diff_args(spec)
    primals, primals64 = [args[i] for i in diff], [args64[i] for i in diff]
    mine, theirs = _of_diff(spec, spec.op, args), _of_diff(spec, spec.reference, args64)
    if cell == "jacfwd":
        argnums = tuple(range(len(diff)))
        got = call_as_declared(jax.jit(jax.jacfwd(mine, argnums=argnums)), *primals)
        with jax.default_device(_CPU):
            want = jax.jacfwd(theirs, argnums=argnums)(*primals64)
    else:  # vmap-jvp: the primals shared, the tangents batched
        tangents = [_insert(p, 0, NEW_AXIS, rng) for p in primals]

        def jvp(p: list[Any], t: list[Any]) -> Any:
            return jax.jvp(mine, p, t)

        # The outputs do not depend on the tangents: unbatched (out_axes None),
        # as jacfwd asks of them too.
        batched = jax.vmap(jvp, in_axes=(None, 0), out_axes=(None, 0))
        outs, got = call_as_declared(jax.jit(batched), primals, tangents)
        want_outs = oracle(spec, args)
        picked = tuple(want_outs[i] for i in _diff_outputs(spec, want_outs))
        assert_outputs(spec, outs, picked, where="jit(vmap(jvp)) outputs", inputs=args)
        with jax.default_device(_CPU):
            parts = [
                jax.jvp(theirs, primals64, [_to64(t[k]) for t in tangents])[1]
                for k in range(NEW_AXIS)
            ]
        want = _stack([tuple(np.asarray(o) for o in part) for part in parts], axis=0)
    # Results in order: each output's Jacobian with respect to each argument,
    # or each output's batch of tangents.
    where = "jit(jacfwd)" if cell == "jacfwd" else "jit(vmap(jvp)) tangents"
    got, want = jax.tree.leaves(got), [np.asarray(w) for w in jax.tree.leaves(want)]
    assert_grads(spec, got, want, where=where)


def check_grads_cell(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """JAX's numerical check against finite differences, in float64: forward
    and reverse mode unless the jvp cell is refused (then reverse only). The
    op is jitted: the check evaluates it dozens of times, and eagerly a
    multi-device op compiles again at each (the eager and grad cells cover
    eager calls)."""
    args = make_args(spec, rng, "float64")
    diff = _diff_args(spec)
    modes = ["rev"] if refusal(spec, "jvp") else ["fwd", "rev"]

    def of_diff(*d: Any) -> Any:
        full = list(args)
        for i, v in zip(diff, d, strict=True):
            full[i] = v
        outs = _outputs(spec.op(*full))
        return tuple(outs[i] for i in _diff_outputs(spec, outs))

    order = int(cell[-1])
    try:
        check_grads(jax.jit(of_diff), [args[i] for i in diff], order=order, modes=modes)
    except AssertionError as error:
        # check_grads' own message opens with an empty line: its gist, on one.
        gist = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise AssertionError(
            f"check_grads(order={order}, modes={modes}) in float64, against finite "
            f"differences: {gist}"
        ) from error


# --- Control flow ------------------------------------------------------------------
def check_control_flow(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    if cell == "scan":
        # The op as a scan body over a stacked axis of length NEW_AXIS.
        stacked = _batched(spec, make_args(spec, rng), [0] * len(spec.args), NEW_AXIS, rng)
        slices = [[s[i] for s in stacked] for i in range(NEW_AXIS)]
        cts = [cotangents_for(spec, s, rng) for s in slices]

        def scanned(*xs: Any) -> Any:
            return lax.scan(lambda c, x: (c, spec.op(*x)), 0, xs)[1]

        want = _stack([oracle(spec, s) for s in slices], 0)
        got = call_as_declared(jax.jit(scanned), *stacked)
        assert_outputs(spec, got, want, "jit(scan), scanned axis first")
        stacked_cts = [jnp.stack(c) for c in zip(*cts, strict=True)]
        got = call_as_declared(jax.jit(_grad(spec, scanned, stacked_cts)), *stacked)
        wants = [vjp_oracle(spec, s, c) for s, c in zip(slices, cts, strict=True)]
        want_grads = [np.stack(w) for w in zip(*wants, strict=True)]
        assert_grads(spec, got, want_grads, "jit(grad(scan)), scanned axis first")
        return
    args = make_args(spec, rng)
    cts = cotangents_for(spec, args, rng)
    if cell == "checkpoint":
        policy = jax.checkpoint_policies.nothing_saveable
        fn = jax.checkpoint(spec.op, policy=policy)
        got = call_as_declared(jax.jit(fn), *args)
        assert_outputs(spec, got, oracle(spec, args), "jit(checkpoint)", args)
        want = vjp_oracle(spec, args, cts)
        got_grads = call_as_declared(jax.jit(_grad(spec, fn, cts)), *args)
        assert_grads(spec, got_grads, want, "jit(grad(checkpoint))", args)
        return
    # cond: one compiled program, run on data that makes its predicate true
    # (the op's branch) and on data that makes it false (zeros of the op's
    # type, and zero gradients).
    fn = _traced_predicate_cond(spec)
    program = partial(call_as_declared, jax.jit(fn))
    gradient = partial(call_as_declared, jax.jit(_grad(spec, fn, cts)))
    assert_outputs(spec, program(*args), oracle(spec, args), "jit(cond), the op's branch", args)
    want = vjp_oracle(spec, args, cts)
    assert_grads(spec, gradient(*args), want, "jit(grad(cond)), the op's branch", args)
    floats = [i for i, a in enumerate(args) if _float(a.dtype)]
    if not floats:
        return  # no data to make the predicate false with
    poisoned = list(args)
    poisoned[floats[0]] = args[floats[0]].at[(0,) * args[floats[0]].ndim].set(jnp.nan)
    zeros = tuple(np.zeros_like(w) for w in oracle(spec, args))
    assert_outputs(spec, program(*poisoned), zeros, "jit(cond), the zeros' branch")
    zero_grads = [np.zeros_like(w) for w in want]
    assert_grads(spec, gradient(*poisoned), zero_grads, "jit(grad(cond)), the zeros' branch")


def _traced_predicate_cond(spec: OpSpec) -> Callable[..., Any]:
    """lax.cond on a predicate computed from the data, so one program holds
    both branches and the data chooses: the op where the first floating
    argument is all finite, zeros of the op's type where not."""

    def fn(*a: Any) -> Any:
        shapes = jax.eval_shape(spec.op, *a)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        floats = [x for x in a if _float(x.dtype)]
        predicate = jnp.all(jnp.isfinite(floats[0])) if floats else jnp.bool_(True)
        return lax.cond(predicate, lambda b: spec.op(*b), lambda b: zeros, a)

    return fn


# --- Hard inputs -------------------------------------------------------------------
# Each case: (rng, shape, dtype, smallest, largest) -> float64 values, where
# smallest and largest are the nonzero magnitudes the argument supports
# (Arg.smallest, Arg.domain). They follow the dtype: where its exp overflows
# (the log of its largest number), where its squares do (the square root of
# it), its smallest normal number and the subnormals below it.
def _exp_edge(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Within 2 of where exp overflows: a softmax without its max subtraction
    divides inf by inf."""
    top = min(math.log(float(jnp.finfo(dtype).max)), largest)
    return top - rng.uniform(0, min(2, top), shape)


def _shifted(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Standard normal, each slice along the first axis shifted by -s, 0 or +s,
    with s beyond where exp overflows (and underflows to zero): a log-sum-exp
    without its max subtraction overflows, one that subtracts a wrong max
    underflows."""
    s = min(1.4 * math.log(float(jnp.finfo(dtype).max)), largest / 2)
    shifts = np.resize(np.array([-s, 0.0, s]), shape[0]) if shape else np.array(s)
    return rng.standard_normal(shape) + shifts.reshape((-1,) + (1,) * (len(shape) - 1))


def _huge(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Magnitudes up to where squares overflow, with random signs."""
    top = min(math.sqrt(float(jnp.finfo(dtype).max)), largest)
    return rng.choice([-1.0, 1.0], shape) * top * rng.uniform(0.25, 1, shape)


def _magnitudes(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Magnitudes log-uniform from 1 to where huge starts, random signs: the
    band between the standard normal and huge, which no other case draws
    (an op that is wrong only for 300 < |x| < 1e17)."""
    top = min(0.25 * math.sqrt(float(jnp.finfo(dtype).max)), largest)
    bottom = min(1.0, top)
    magnitude = np.exp(rng.uniform(math.log(bottom), math.log(top), shape))
    return rng.choice([-1.0, 1.0], shape) * magnitude


def _tiny(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """The smallest normal numbers, and a quarter of them subnormal (or the
    smallest magnitudes the argument supports, where that is more)."""
    tiny = float(jnp.finfo(dtype).smallest_normal)
    if smallest > 0:
        magnitude = max(smallest, tiny) * np.ones(shape)
    else:
        magnitude = tiny * np.where(rng.random(shape) < 0.25, rng.uniform(0.01, 0.5, shape), 1)
    return rng.choice([-1.0, 1.0], shape) * magnitude * rng.uniform(1, 8, shape)


def _zeros(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Zeros of both signs: a log of zero, a division by a norm of zero."""
    return rng.choice([-0.0, 0.0], shape)


def _ties(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Three values, exact in every float dtype, repeated: ties everywhere."""
    return rng.choice([-1.0, 0.5, 2.0], shape)


def _equal(rng: Any, shape: Any, dtype: Any, smallest: float, largest: float) -> np.ndarray:
    """Every element one value: no spread, a variance of zero."""
    return np.full(shape, rng.standard_normal())


HARD_CASES: dict[str, Callable[..., np.ndarray]] = {
    "exp-edge": _exp_edge,
    "shifted": _shifted,
    "huge": _huge,
    "magnitudes": _magnitudes,
    "tiny": _tiny,
    "zeros": _zeros,
    "ties": _ties,
    "equal": _equal,
}


def hard_args(spec: OpSpec, case: str, rng: np.random.Generator) -> list[Any]:
    """make_args, with every floating argument drawn from a hard case and
    mapped into its domain (an argument with its own sample keeps it)."""
    args = make_args(spec, rng)
    for i, (arg, a) in enumerate(zip(spec.args, args, strict=True)):
        if arg.sample is not None or not _float(a.dtype):
            continue
        low, high = arg.domain
        largest = max(abs(low), abs(high))
        values = HARD_CASES[case](rng, a.shape, a.dtype, arg.smallest, largest)
        if low >= 0:
            values = np.abs(values)
        elif high <= 0:
            values = -np.abs(values)
        args[i] = jnp.asarray(np.clip(values, low, high), a.dtype)
    return args


def flushed(args: list[Any]) -> list[Any]:
    """args with their subnormal values replaced by zeros of the same sign."""
    out = []
    for a in args:
        if _float(a.dtype):
            values = np.asarray(a, np.float64)
            small = np.abs(values) < float(jnp.finfo(a.dtype).smallest_normal)
            a = jnp.asarray(np.where(small, np.copysign(0.0, values), values), a.dtype)
        out.append(a)
    return out


def _either(check: Callable[[Any], None], wants: list[Any]) -> None:
    """check passes for one of wants (the first one that does is kept in the
    worst-case record of compare.py, not a failed alternative)."""
    for i, want in enumerate(wants):
        seen = dict(WORST)
        try:
            check(want)
            return
        except AssertionError:
            WORST.update(seen)
            if i == len(wants) - 1:
                raise


def check_hard(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """One hard case, eagerly, jitted, under vmap (two draws of it) and
    differentiated against random cotangents.

    Where an input is subnormal, the op may see it as it is or as zero: XLA's
    CPU treats subnormal operands of arithmetic as zeros (and flushes subnormal
    results), but an op that moves a value without arithmetic keeps it. The
    op must match the oracle of one or the other, for the whole result."""
    case = cell.removeprefix("hard-")
    args, more = hard_args(spec, case, rng), hard_args(spec, case, rng)
    views = [args, flushed(args)] if case == "tiny" else [args]
    also = [more, flushed(more)] if case == "tiny" else [more]
    wants = [oracle(spec, view) for view in views]
    eager, jitted = call_as_declared(spec.op, *args), call_as_declared(jax.jit(spec.op), *args)
    # Declared ill-conditioned: each element also within a multiple of the
    # reference's own error, computed as the op's result is.
    hard = ill_conditioned(spec, cell) is not None
    ref = _outputs(jax.jit(spec.reference)(*args)) if hard else None
    _either(lambda want: assert_outputs(spec, eager, want, "eager", args, reference=ref), wants)
    _either(lambda want: assert_outputs(spec, jitted, want, "jit", args, reference=ref), wants)
    batched = [jnp.stack([a, b]) for a, b in zip(args, more, strict=True)]
    stacked = [
        _stack([want, oracle(spec, view)], axis=0) for want, view in zip(wants, also, strict=True)
    ]
    got = call_as_declared(jax.jit(jax.vmap(spec.op)), *batched)
    ref = _outputs(jax.jit(jax.vmap(spec.reference))(*batched)) if hard else None
    check = partial(
        assert_outputs, spec, got, where="jit(vmap), two draws", batched=batched, reference=ref
    )
    _either(lambda want: check(want=want), stacked)
    if _diff_args(spec):
        cts = cotangents_for(spec, args, rng)
        grads = call_as_declared(jax.jit(_grad(spec, spec.op, cts)), *args)
        ref = jax.jit(_grad(spec, spec.reference, cts))(*args) if hard else None
        _either(
            lambda want: assert_grads(spec, grads, want, "jit(grad)", args, reference=ref),
            [vjp_oracle(spec, view, cts) for view in views],
        )


# --- shard_map -----------------------------------------------------------------------
def _mesh(kind: str, axis_type: AxisType = AxisType.Auto) -> jax.sharding.Mesh:
    shape, names = MESHES[kind]
    count = int(np.prod(shape))
    return jax.make_mesh(
        shape, names, axis_types=(axis_type,) * len(shape), devices=mesh_devices(count)
    )


def _specs(
    axes_list: Any, axis: str | tuple[str, ...], mesh_axis: str | tuple[str, ...] | None = "x"
) -> list[P]:
    """Each array's spec with `mesh_axis` on its dimension named `axis`; given
    several names, on the first of them the array has (a spec names a mesh
    axis once)."""
    names = (axis,) if isinstance(axis, str) else axis
    specs = []
    for axes in axes_list:
        first = next((a for a in axes if a in names), None)
        specs.append(P(*(mesh_axis if a == first else None for a in axes)))
    return specs


def _out_specs(spec: OpSpec, specs: list[P]) -> Any:
    return specs[0] if len(specs) == 1 else tuple(specs)


def _split(
    mesh: Any, arrays: list[Any], axes_list: Any, axis: str, mesh_axis: Any = "x"
) -> list[Any]:
    """Each array placed on mesh, split over mesh_axis along its dimension
    named axis (replicated where it has none)."""
    specs = _specs(axes_list, axis, mesh_axis)
    return [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(arrays, specs, strict=True)]


def _cotangent_axes(spec: OpSpec, args: list[Any]) -> list[tuple[str, ...]]:
    """The named axes of each differentiable output of the op on args: its
    cotangent's."""
    outs = _outputs(jax.eval_shape(spec.op, *args))
    return [spec.outputs[i] for i in _diff_outputs(spec, outs)]


def check_shard_map(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    if cell.startswith("shard-map-wrong-out-specs-"):
        axis = cell.removeprefix("shard-map-wrong-out-specs-")
        mesh = _mesh("1d")
        args = make_args(spec, rng)
        in_specs = _specs([a.axes for a in spec.args], axis)
        # Every output declared replicated, though each shard computes its own
        # rows: JAX's check (check_vma) must refuse this at trace time, which
        # it can only do if the op's result type carries the varying axes.
        wrong = _out_specs(spec, [P()] * len(spec.outputs))
        fn = jax.shard_map(spec.op, mesh=mesh, in_specs=tuple(in_specs), out_specs=wrong)
        try:
            jax.jit(fn)(*args)
        except ValueError as error:
            if "out_specs" not in str(error):
                raise  # the op's own error: a declared refusal may name it
            return
        raise AssertionError("out_specs declaring every output replicated were accepted")
    # shard-map-[grad-inside-|grad-outside-]<axis>-<mesh>
    rest, mesh_kind = cell.removeprefix("shard-map-").rsplit("-", 1)
    kind = next((k for k in ("grad-inside", "grad-outside") if rest.startswith(f"{k}-")), "")
    axis = rest.removeprefix(f"{kind}-") if kind else rest
    mesh = _mesh(mesh_kind)
    args = make_args(spec, rng)
    in_specs = tuple(_specs([a.axes for a in spec.args], axis))
    out_specs = _out_specs(spec, _specs(spec.outputs, axis))
    mapped = jax.shard_map(spec.op, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    if not kind:
        got = call_as_declared(jax.jit(mapped), *args)
        assert_outputs(spec, got, oracle(spec, args), "jit(shard_map)", args)
        return
    cts = cotangents_for(spec, args, rng)
    want = vjp_oracle(spec, args, cts)
    if kind == "grad-outside":
        got_grads = call_as_declared(jax.jit(_grad(spec, mapped, cts)), *args)
        assert_grads(spec, got_grads, want, "jit(grad(shard_map))", args)
        return
    # grad-inside: each shard differentiates its own piece; an argument the
    # axis does not split is shared, and JAX sums its cotangent across shards.
    outs = _outputs(jax.eval_shape(spec.op, *args))
    picked = _diff_outputs(spec, outs)
    ct_specs = tuple(_specs([spec.outputs[i] for i in picked], axis))
    grad_specs = tuple(in_specs[i] for i in _diff_args(spec))

    def local(*a_and_cts: Any) -> Any:
        a, c = a_and_cts[: len(args)], a_and_cts[len(args) :]
        return _grad(spec, spec.op, list(c))(*a)

    inside = jax.shard_map(local, mesh=mesh, in_specs=in_specs + ct_specs, out_specs=grad_specs)
    got = call_as_declared(jax.jit(inside), *args, *cts)
    assert_grads(spec, got, want, "jit(shard_map(grad))", args)


def check_shard_map_partial(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """The op in a shard_map manual over "x" alone of a 2-D mesh, "y" left
    free (axis_names), its inputs split along the axis over ("x", "y"):
    inside, each shard's operands are still split over "y", so the op's own
    partitioning (a custom_partitioning rule, an FFI call's sharding rule)
    meets a mesh partly manual. Values, the gradient, and the compiled
    collectives of both programs no more than the reference's in the same
    shard_map.

    shard-map-partial-<d>: "y" Auto (the op's auto_op, where it has one);
    shard-map-partial-explicit-<d>: "y" Explicit (jax.make_mesh's default),
    the op itself; shard-map-partial-<d>-free-<e>: "y" Auto, the inputs split
    along d over "x" and along e, an axis no shard_map splits (the row a
    row-wise op reduces over, say), over "y": an op that computes each
    block of e alone (normalises each shard of a row), or whose own
    sharding rule declares e splittable where it is not, fails."""
    rest = cell.removeprefix("shard-map-partial-")
    explicit = rest.startswith("explicit-")
    axis, _, free = rest.removeprefix("explicit-").partition("-free-")
    mesh = _mesh("2d", AxisType.Explicit if explicit else AxisType.Auto)
    args = make_args(spec, rng)
    cts = cotangents_for(spec, args, rng)
    in_specs = tuple(_specs([a.axes for a in spec.args], axis))
    out_specs = _out_specs(spec, _specs(spec.outputs, axis))

    def partly_manual(fn: Callable[..., Any]) -> Any:
        return jax.shard_map(
            fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names={"x"}
        )

    # An Auto "y": the op's entry point for Auto shardings, where it has one.
    fn = spec.op if explicit else spec.auto_op or spec.op
    mine, theirs = partly_manual(fn), partly_manual(spec.reference)
    if free:
        placed = _split_two(mesh, args, [a.axes for a in spec.args], axis, free)
        ct_axes = _cotangent_axes(spec, args)
        ct_placed = _split_two(mesh, cts, ct_axes, axis, free)
    else:
        placed = _split(mesh, args, [a.axes for a in spec.args], axis, ("x", "y"))
        ct_placed = _split(mesh, cts, _cotangent_axes(spec, args), axis, ("x", "y"))
    count = len(args)
    programs = {
        "forward": (jax.jit(mine), jax.jit(theirs), placed),
        "gradient": (
            jax.jit(_grad_of(spec, mine, count)),
            jax.jit(_grad_of(spec, theirs, count)),
            placed + ct_placed,
        ),
    }
    got = call_as_declared(programs["forward"][0], *placed)
    if explicit:
        # The results' types: split over "y" as the reference's (else the
        # gradient's random weighting meets mismatched shardings).
        assert_same_shardings(got, theirs, placed)
    got_grads = call_as_declared(programs["gradient"][0], *placed, *ct_placed)
    where = f"jit(shard_map manual over x, {'Explicit' if explicit else 'Auto'} y"
    where += f" splitting {free})" if free else ")"
    assert_outputs(spec, got, oracle(spec, args), where=where, inputs=args)
    want_grads = vjp_oracle(spec, args, cts)
    assert_grads(spec, got_grads, want_grads, where=f"gradient of {where}", inputs=args)
    assert_collectives(spec, cell, programs)


def _free_split(spec: OpSpec) -> list[str]:
    """The axes of shard-map-partial-<d>-free-<e>: those no shard_map splits
    (a row-wise op's row), each split over the free mesh axis."""
    return [a for a in spec.axes if a not in spec.shard_map_axes]


def _split_two(mesh: Any, arrays: list[Any], axes_list: Any, axis: str, free: str) -> list[Any]:
    """Each array placed on mesh, split over "x" along its dimension named
    `axis` and over "y" along the one named `free` (replicated along
    whichever it lacks)."""
    placed = []
    for array, axes in zip(arrays, axes_list, strict=True):
        mesh_axes = {axis: "x", free: "y"}
        # a spec names a mesh axis once: on the first dimension so named
        first = [a in mesh_axes and a not in axes[:i] for i, a in enumerate(axes)]
        spec = P(*(mesh_axes[a] if f else None for a, f in zip(axes, first, strict=True)))
        placed.append(jax.device_put(array, NamedSharding(mesh, spec)))
    return placed


# --- jit with sharded inputs -----------------------------------------------------------
def _grad_of(spec: OpSpec, fn: Callable[..., Any], count: int) -> Callable[..., Any]:
    """The gradient of fn's random weighting, as a function of its `count`
    arguments followed by the cotangents."""

    def grad(*args_and_cts: Any) -> Any:
        return _grad(spec, fn, list(args_and_cts[count:]))(*args_and_cts[:count])

    return grad


def _collectives(compiled_text: str) -> dict[str, int]:
    return {c: len(re.findall(rf"\b{c}(-start)?\(", compiled_text)) for c in COLLECTIVES}


def assert_same_shardings(got: Any, reference: Callable[..., Any], inputs: list[Any]) -> bool:
    """Under an explicit mesh every result is typed with its sharding: the op's
    must be the reference's on the same inputs (a gathered result is not).
    False where JAX refuses the reference itself on these shardings (say,
    jax.lax.sort along a split axis): there is nothing to compare with."""
    try:
        theirs = jax.jit(reference)(*inputs)
    except Exception as error:
        # ShardingTypeError is not public: matched by its name.
        if type(error).__name__ != "ShardingTypeError":
            raise
        return False
    for k, (g, w) in enumerate(zip(_outputs(got), _outputs(theirs), strict=True)):
        assert g.sharding.is_equivalent_to(w.sharding, w.ndim), (
            f"output {k}: sharded {g.sharding.spec}, the reference's {w.sharding.spec}"
        )
    return True


def check_jit_sharded(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    explicit = cell.startswith("jit-explicit-")
    set_mesh = cell.startswith("jit-explicit-set-mesh-")
    two_d = cell.startswith("jit-explicit-2d-")
    prefixes = ("jit-explicit-set-mesh-", "jit-explicit-2d-", "jit-explicit-", "jit-auto-")
    prefix = next(p for p in prefixes if cell.startswith(p))
    axis = tuple(cell.removeprefix(prefix).split("+"))
    mesh = _mesh("2d" if two_d else "1d", AxisType.Explicit if explicit else AxisType.Auto)
    args = make_args(spec, rng)
    cts = cotangents_for(spec, args, rng)
    shardings = [NamedSharding(mesh, s) for s in _specs([a.axes for a in spec.args], axis)]
    placed = [jax.device_put(a, s) for a, s in zip(args, shardings, strict=True)]
    ct_axes = [
        spec.outputs[i] for i in _diff_outputs(spec, _outputs(jax.eval_shape(spec.op, *args)))
    ]
    ct_placed = [
        jax.device_put(c, NamedSharding(mesh, s))
        for c, s in zip(cts, _specs(ct_axes, axis), strict=True)
    ]
    fn = spec.op if explicit or spec.auto_op is None else spec.auto_op
    # The cotangents are arguments, not constants the gradient closes over: a
    # gradient that does not read the inputs (a linear op's) would otherwise
    # be a program of constants alone, placed on one device.
    programs = {
        "forward": (jax.jit(fn), jax.jit(spec.reference), placed),
        "gradient": (
            jax.jit(_grad_of(spec, fn, len(args))),
            jax.jit(_grad_of(spec, spec.reference, len(args))),
            placed + ct_placed,
        ),
    }
    # The oracle runs on one CPU device, outside the mesh.
    want, want_grads = oracle(spec, args), vjp_oracle(spec, args, cts)
    with jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext():
        got = call_as_declared(programs["forward"][0], *placed)
        got_grads = call_as_declared(programs["gradient"][0], *placed, *ct_placed)
        assert_outputs(spec, got, want, "jit", args)
        assert_grads(spec, got_grads, want_grads, "jit(grad)", args)
        refused = explicit and not assert_same_shardings(got, spec.reference, placed)
        # In auto mode XLA chooses the communication; in explicit mode the types do.
        assert_collectives(spec, cell, programs, reference_refused=refused)


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


def assert_collectives(
    spec: OpSpec, cell: str, programs: Mapping[str, Any], reference_refused: bool = False
) -> None:
    """Each program, forward and gradient (name: (the op's jitted, the
    reference's jitted, the inputs)), makes exactly the collectives declared
    for it, else no more of any than the reference's on the same inputs, or
    none where JAX refuses the reference on them (nothing to compare with)."""
    declared = declared_collectives(spec, cell)
    for name, (mine_fn, theirs_fn, inputs) in programs.items():
        mine = _collectives(mine_fn.lower(*inputs).compile().as_text())
        counts = getattr(declared, name) if declared is not None else None
        if counts is not None:
            want = {c: counts.get(c, 0) for c in COLLECTIVES}
            assert mine == want, (
                f"{name} program: collectives {_some(mine)}, declared {_some(want)} "
                f"(extra_collectives: {declared.why})"
            )
        elif reference_refused:
            assert not any(mine.values()), (
                f"{name} program: collectives {_some(mine)} where JAX refuses the reference "
                "on these shardings: declare their counts in extra_collectives"
            )
        else:
            theirs = _collectives(theirs_fn.lower(*inputs).compile().as_text())
            more = {c: (mine[c], theirs[c]) for c in COLLECTIVES if mine[c] > theirs[c]}
            assert not more, (
                f"{name} program: more collectives than the reference (op, reference): {more}"
            )


def _some(counts: Mapping[str, int]) -> dict[str, int]:
    """The collectives a program makes (those it makes none of left out)."""
    return {c: n for c, n in counts.items() if n}


def _grad_grad(
    spec: OpSpec, fn: Callable[..., Any], cotangents: list[Any], directions: list[Any]
) -> Callable[..., Any]:
    """Reverse over reverse: the gradient, with respect to the differentiable
    arguments, of the gradient of fn's random weighting (as _grad) weighted
    by random directions, one per differentiable argument."""
    first = _grad(spec, fn, cotangents)

    def weighted(*args: Any) -> Any:
        return sum(jnp.sum(v * g) for v, g in zip(directions, first(*args), strict=True))

    return jax.grad(weighted, argnums=tuple(_diff_args(spec)))


def check_grad_grad_explicit(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """Second order, reverse over reverse and jitted, with the inputs, the
    cotangents and the directions split along one axis over an Explicit mesh
    (no jax.set_mesh: the mesh is the operands' types'): the op's backward
    pass is itself differentiated on sharding-typed values.
    grad-grad-explicit-vmap-<d>: the same of vmap of the op, every argument
    with a new leading axis (grad(grad(vmap(op)))), split along d or, for
    grad-grad-explicit-vmap-new-axis, along the new axis: the op's batching
    rules meet sharding-typed values, in its backward's own backward too.

    The oracle is the reference's own second order in float64 on the CPU,
    also where the declaration has a gradient_oracle: that one stands in where
    the reference's autodiff is wrong (coincident points, a norm of zero),
    which random inputs avoid."""
    rest = cell.removeprefix("grad-grad-explicit-")
    batched = rest.startswith("vmap-")
    axis = rest.removeprefix("vmap-") if batched else rest
    mesh = _mesh("1d", AxisType.Explicit)
    args = make_args(spec, rng)
    arg_axes = [a.axes for a in spec.args]
    ct_axes = _cotangent_axes(spec, args)
    op, reference = spec.op, spec.reference
    if batched:  # the new axis, named "new-axis" (no declared axis has a dash)
        size = len(mesh.devices.flat) if axis == "new-axis" else NEW_AXIS
        args = [_insert(a, 0, size, rng, arg) for a, arg in zip(args, spec.args, strict=True)]
        arg_axes = [("new-axis", *axes) for axes in arg_axes]
        ct_axes = [("new-axis", *axes) for axes in ct_axes]
        op, reference = jax.vmap(op), jax.vmap(reference)
    cts = cotangents_for(spec, args, rng, op)
    diff = _diff_args(spec)
    directions = [jnp.asarray(rng.standard_normal(args[i].shape), args[i].dtype) for i in diff]
    split = len(args), len(args) + len(cts)

    # The cotangents and directions are arguments, not constants the program
    # closes over: they arrive split like the inputs.
    def program(*everything: Any) -> Any:
        a, c, v = everything[: split[0]], everything[split[0] : split[1]], everything[split[1] :]
        return _grad_grad(spec, op, list(c), list(v))(*a)

    # keep_unused: a linear op's second order is zeros, read from no input,
    # and the inputs kept are what places such a program on the mesh.
    got = call_as_declared(
        jax.jit(program, keep_unused=True),
        *_split(mesh, args, arg_axes, axis),
        *_split(mesh, cts, ct_axes, axis),
        *_split(mesh, directions, [arg_axes[i] for i in diff], axis),
    )
    with jax.default_device(_CPU):
        cts64, directions64 = [_to64(c) for c in cts], [_to64(v) for v in directions]
        want = _grad_grad(spec, reference, cts64, directions64)(*(_to64(a) for a in args))
    # assert_grads holds the declaration's gradient_tolerance: the second order's, here.
    tolerance = spec.second_order_tolerance or spec.gradient_tolerance
    held = replace(spec, gradient_tolerance=tolerance)
    where = "jit(grad(grad(vmap)))" if batched else "jit(grad(grad))"
    inputs = {"batched": args} if batched else {"inputs": args}
    assert_grads(held, got, [np.asarray(w) for w in want], where=where, **inputs)


# --- matmul precision --------------------------------------------------------------
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


# --- export --------------------------------------------------------------------------
def check_export(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    args = make_args(spec, rng)
    if cell == "export-symbolic":
        (size,) = export.symbolic_shape(spec.symbolic_axis or "")
        structs = [
            jax.ShapeDtypeStruct(
                tuple(size if d == spec.symbolic_axis else spec.sizes[d] for d in arg.axes),
                a.dtype,
            )
            for arg, a in zip(spec.args, args, strict=True)
        ]
        exported = export.export(
            jax.jit(spec.op), platforms=("cpu",), disabled_checks=list(spec.export_checks)
        )(*structs)
        loaded = export.deserialize(exported.serialize())
        cpu = jax.devices("cpu")[0]
        got = call_as_declared(loaded.call, *jax.device_put(args, cpu))
        assert_outputs(spec, got, oracle(spec, args), "deserialized artifact", args)
        # A different size along the symbolic axis: one artifact serves both.
        smaller = {**spec.sizes, spec.symbolic_axis: 1}
        other = make_args(OpSpec(**{**spec.__dict__, "sizes": smaller}), rng)
        got = call_as_declared(loaded.call, *jax.device_put(other, cpu))
        where = f"deserialized artifact, {spec.symbolic_axis} = 1"
        assert_outputs(spec, got, oracle(spec, other), where, other)
        return
    # lower-<platform>: from this (CPU) host, for the target.
    platform = cell.removeprefix("lower-")
    exported = _lowered_for(spec, platform, args)
    assert exported.platforms == (platform,)
    want = [(o.shape, o.dtype) for o in _outputs(jax.eval_shape(spec.op, *args))]
    assert [(o.shape, o.dtype) for o in exported.out_avals] == want
    module = exported.mlir_module()
    marker = spec.platforms[platform]
    if marker:
        # The op's own implementation for that target (its kernel or custom call).
        assert re.search(marker, module), f"no {marker!r} in the {platform} module"
    elif platform != "cpu":
        # No marker: the op claims one program for every platform, so the
        # target's must be the CPU's, whose numbers the other cells check.
        cpu = _lowered_for(spec, "cpu", args).mlir_module()
        assert _program_of(module) == _program_of(cpu), (
            f"the {platform} module differs from the CPU's: declare its marker"
        )
    if platform == "cpu":
        # The serialized CPU program, called here (replicated on as many CPU
        # devices as it was exported for), matches the oracle.
        loaded = export.deserialize(exported.serialize())
        mesh = jax.sharding.Mesh(jax.devices("cpu")[: loaded.nr_devices], ("all",))
        placed = jax.device_put(args, NamedSharding(mesh, P()))
        assert_outputs(
            spec,
            call_as_declared(loaded.call, *placed),
            oracle(spec, args),
            "deserialized artifact",
            args,
        )


def _program_of(module: str) -> str:
    """A module's text without its source locations (where it was traced from)."""
    lines = [line for line in module.splitlines() if not line.startswith("#loc")]
    return "\n".join(re.sub(r"\s*loc\(.*$", "", line) for line in lines)


def _lowered_for(spec: OpSpec, platform: str, args: list[Any]) -> export.Exported:
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    return export.export(
        jax.jit(spec.op), platforms=(platform,), disabled_checks=list(spec.export_checks)
    )(*structs)


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
