"""The cells' inputs, oracles and comparisons: arguments drawn as each Arg
declares (and with new axes, for vmap, scan and the batched oracles), the
float64 oracles of values and gradients, and the comparisons against them
within the declared tolerances (compare.py counts the ulps). What else a
cell holds its results to is results.py's."""

from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import sys
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compare import (
    PLATFORM_KINDS,
    REDUCTION,
    TRANSCENDENTAL,
    Ulps,
    assert_close,
    at_platform,
    platform_of,
    summary,
)

# isort: split
from .declaration import REFERENCE_FACTOR, Arg, OpSpec, refusal
from .draws import draw
from .validation import shape_of


# --- Inputs ---------------------------------------------------------------------
def _shape(spec: OpSpec, axes: tuple[str, ...]) -> tuple[int, ...]:
    return shape_of(axes, spec.sizes)


def _float(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


# What the cells draw, for whoever asks (the kit's shrink.py writes a repro
# script from it): None, or a list that each draw appends (kind, arrays,
# details) to; kind: args, hard, cotangents, vmap.
DRAWN: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("DRAWN", default=None)


def drawn(kind: str, arrays: Any, **details: Any) -> None:
    """Note a cell's draw where DRAWN asks for them."""
    record = DRAWN.get()
    if record is not None:
        record.append((kind, arrays, details))


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
        values = draw(arg, shape_of(arg.axes, sizes), rng, sizes)
        out.append(jnp.asarray(values, arg.dtype or dtype or spec.dtype))
    drawn("args", out)
    return out


# --- New axes: vmap's, scan's and the batched oracles' ----------------------------
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
        if arg is not None and arg.range is not None and arg.sample is None:
            # The same values elsewhere: within the range at this cell's sizes.
            values = rng.permuted(first.reshape(-1)).reshape(first.shape)
            if arg.sorted and values.ndim:
                values = np.sort(values, axis=-1)
            slices.append(values)
            continue
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


def _outputs(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _diff_outputs(spec: OpSpec, outputs: tuple[Any, ...]) -> list[int]:
    if spec.differentiable_outputs is not None:
        return list(spec.differentiable_outputs)
    return [i for i, o in enumerate(outputs) if _float(o.dtype)]


def _diff_args(spec: OpSpec) -> list[int]:
    return [i for i, a in enumerate(spec.args) if a.differentiable]


# --- Oracles and comparisons ---------------------------------------------------------
def oracle(spec: OpSpec, args: list[Any]) -> tuple[np.ndarray, ...]:
    """The float64 oracle on exactly the values the op sees: the declared one,
    or else the reference itself computing in float64 on the CPU."""
    if spec.oracle is None:
        with jax.default_device(_CPU):
            outputs = _outputs(spec.reference(*(_to64(a) for a in args)))
        return tuple(np.asarray(o) for o in outputs)
    as64 = [np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a) for a in args]
    with _quiet_on_nonfinite(as64):
        return _outputs(spec.oracle(*as64))


def _quiet_on_nonfinite(arrays: list[Any]) -> Any:
    """NumPy's floating-point warnings off where an input is inf or NaN (the
    hard-nonfinite cells): inf - inf is NaN by design there, and a project
    whose pytest turns warnings into errors would fail its own oracle."""
    nonfinite = any(np.issubdtype(a.dtype, np.inexact) and not np.isfinite(a).all() for a in arrays)
    return np.errstate(all="ignore") if nonfinite else contextlib.nullcontext()


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
    cotangents = [
        jnp.asarray(rng.standard_normal(outs[i].shape), outs[i].dtype)
        for i in _diff_outputs(spec, outs)
    ]
    drawn("cotangents", cotangents)
    return cotangents


def vjp_oracle(spec: OpSpec, args: list[Any], cotangents: list[Any]) -> list[np.ndarray]:
    """Gradients of the random weighting of the outputs, with respect to each
    differentiable argument: the declared gradient oracle, or else autodiff of
    the reference in float64, eagerly."""
    if spec.gradient_oracle is not None:
        as64 = [np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a) for a in args]
        cts = [np.asarray(c, np.float64) for c in cotangents]
        with _quiet_on_nonfinite(as64):
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
    in_axes: list[int | None] | None = None,
    out_axes: Any = None,
    shown: list[Any] | None = None,
) -> None:
    """The op's outputs against the oracle's, within its tolerance. where:
    what computed them (jit, vmap, ...), for a failure's message; inputs: the
    op's arguments, where got is its unbatched result (a failure then names
    the inputs at the worst element); batched: the arguments, where got is a
    batched result (their scale is an all-zero oracle's: compare.py), and
    in_axes and out_axes the vmap's, where it has them (a failure then shows
    the batch slice of the worst element); shown: the arguments, for a
    failure's message alone, where they are not `inputs` (whose largest value
    would be an all-zero oracle's scale); reference: the reference's own
    results, in an ill_conditioned cell."""
    got = _outputs(got)
    assert len(got) == len(want), f"{where}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        axes = spec.outputs[k] if k < len(spec.outputs) else ()
        _compare(
            spec,
            spec.tolerance,
            g,
            w,
            k,
            _said(where, f"output {k}"),
            axes,
            inputs,
            _inputs_at(spec, inputs, axes),
            batched,
            reference,
            in_axes,
            out_axes,
            shown,
        )


def assert_grads(
    spec: OpSpec,
    got: Any,
    want: list[np.ndarray],
    where: str = "",
    inputs: list[Any] | None = None,
    of: list[str] | None = None,
    batched: list[Any] | None = None,
    reference: Any = None,
    in_axes: list[int | None] | None = None,
    out_axes: Any = None,
    shown: list[Any] | None = None,
) -> None:
    """Gradients against the oracle's, within the gradient tolerance: one per
    differentiable argument (or per name in `of`), else (tangents, second
    orders) results counted in order. where, inputs, batched, in_axes,
    out_axes and shown: as assert_outputs."""
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want), f"{where}: {len(got)} gradients, expected {len(want)}"
    names = of or [spec.args[i].name for i in _diff_args(spec)]
    if len(names) != len(got):
        names = []
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if names:
            what = f"gradient of {names[k]}"
            axes = next(a.axes for a in spec.args if a.name == names[k])
        else:
            what, axes = f"result {k}", ()
        at = _inputs_at(spec, inputs if names else None, axes)
        _compare(
            spec,
            spec.gradient_tolerance,
            g,
            w,
            k,
            _said(where, what),
            axes,
            inputs,
            at,
            batched,
            reference,
            in_axes,
            out_axes,
            shown,
        )


def _compare(
    spec: OpSpec,
    declared: Ulps,
    g: Any,
    w: Any,
    k: int,
    said: str,
    axes: tuple[str, ...],
    inputs: list[Any] | None,
    at: Callable[[tuple[int, ...]], str] | None,
    batched: list[Any] | None,
    reference: Any,
    in_axes: list[int | None] | None,
    out_axes: Any,
    shown: list[Any] | None,
) -> None:
    """One result (the k-th) against the oracle's, for assert_outputs and
    assert_grads: the declared tolerance on g's platform, the inputs' scale,
    the reference's own error (ill-conditioned cells), the kinds of operation
    a partly-IEEE platform widens for, and the inputs a failure shows."""
    details = _inputs_shown(
        spec, shown if inputs is None else inputs, batched, axes, in_axes, _nth(out_axes, k)
    )
    assert_close(
        g,
        w,
        at_platform(declared, spec.matmul_inputs, platform_of(g)),
        where=said,
        inputs_at=at,
        scale=_scale(inputs or batched),
        also=_reference_error(reference, k, w),
        kinds=operation_kinds(spec) if platform_of(g) in _PARTLY_IEEE else None,
        details=details,
    )


_KINDS: dict[Any, frozenset[str] | None] = {}


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
        quiet = DRAWN.set(None)  # its own draws are no cell's
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
            primitives = set().union(*(_primitives(p.jaxpr) for p in programs))
        except Exception:  # a program that cannot be traced here: any kind
            return None
        finally:
            DRAWN.reset(quiet)
        names = {p.name for p in primitives}
        if names & OPAQUE or not primitives <= _jax_primitives():
            _KINDS[key] = None  # a computation no jaxpr shows: any kind
        else:
            found = {"transcendental"} if names & TRANSCENDENTAL else set()
            found |= {"reduction"} if names & REDUCTION else set()
            _KINDS[key] = frozenset(found)
    return _KINDS[key]


# JAX's primitives whose computation no jaxpr shows: a serialized module
# (jax.export), a foreign function (XLA FFI), a host callback. An op holding
# one, or a primitive of its own (defined outside JAX: its lowering is its
# own), has kinds no jaxpr can tell: every kind is assumed for it.
OPAQUE = frozenset({"call_exported", "ffi_call", "pure_callback", "io_callback"})


def _jax_primitives() -> set[Any]:
    """The primitives JAX itself defines, in its modules loaded now (a
    primitive an op uses was loaded with the module that defines it)."""
    from jax.extend.core import Primitive

    found = set()
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "jax" or name.startswith("jax.")):
            found |= {v for v in list(vars(module).values()) if isinstance(v, Primitive)}
    return found


def _primitives(jaxpr: Any) -> set[Any]:
    """Every primitive in a jaxpr and in the jaxprs its equations hold (jit,
    custom rules, control flow, Pallas kernels)."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive)
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's
                if hasattr(inner, "eqns"):
                    names |= _primitives(inner)
    return names


def _reference_error(reference: Any, k: int, want: Any) -> np.ndarray | None:
    """REFERENCE_FACTOR times the reference's own error in its k-th result
    (None: no reference given), at the array's scale: the largest error the
    reference makes anywhere in the result, for every element (an element
    the reference happens to get exact is no harder for the op than its
    neighbours). Where both are non-finite the comparison's own rule holds."""
    if reference is None:
        return None
    ref = np.asarray(jax.tree.leaves(reference)[k], np.float64)
    error = np.abs(ref - np.asarray(want, np.float64))
    worst = float(np.max(error, initial=0.0, where=np.isfinite(error)))
    return REFERENCE_FACTOR * np.full(error.shape, worst)


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


def _nth(out_axes: Any, k: int) -> Any:
    """The k-th result's out_axes (one for all, or a tuple of each's)."""
    return out_axes[k] if isinstance(out_axes, (tuple, list)) else out_axes


def _inputs_shown(
    spec: OpSpec,
    inputs: list[Any] | None,
    batched: list[Any] | None,
    axes: tuple[str, ...],
    in_axes: list[int | None] | None = None,
    out_axis: int | None = None,
) -> Callable[[tuple[int, ...]], list[str]] | None:
    """For a failure's message, a function from the worst element's index (in
    a result with named `axes`) to a line per input: its dtype and shape, and
    its values where small, else the slice holding that element (a row),
    else its range (compare.summary). For a batched result, first the vmap's
    in_axes and out_axes, and each batched input at the batch slice of the
    element, where in_axes and out_axis say where that is."""
    if inputs is None and batched is None:
        return None

    def fixed_of(arg: Arg, fixed: Mapping[str, int]) -> list[int | None]:
        return [fixed.get(d) for d in arg.axes]

    def lines(index: tuple[int, ...]) -> list[str]:
        if inputs is not None:
            fixed = dict(zip(axes, index, strict=True)) if len(index) == len(axes) else {}
            return [
                f"input {summary(arg.name, value, tuple(fixed_of(arg, fixed)))}"
                for arg, value in zip(spec.args, inputs, strict=True)
            ]
        assert batched is not None
        if in_axes is None or out_axis is None:
            return [
                f"input {arg.name} (batched): {summary(arg.name, value).split(': ', 1)[1]}"
                for arg, value in zip(spec.args, batched, strict=True)
            ]
        axis = out_axis % len(index) if index else 0
        slot = index[axis] if index else 0
        rest = index[:axis] + index[axis + 1 :]
        fixed = dict(zip(axes, rest, strict=True)) if len(rest) == len(axes) else {}
        said = [
            f"batched: in_axes={list(in_axes)}, out_axes={out_axis}; the element is in slice {slot}"
        ]
        for arg, value, ax in zip(spec.args, batched, in_axes, strict=True):
            at = fixed_of(arg, fixed)
            note = ""
            if ax is not None:
                at.insert(ax, slot)
                note = f" (batched on axis {ax})"
            head, body = summary(arg.name, value, tuple(at)).split(": ", 1)
            said.append(f"input {head}{note}: {body}")
        return said

    return lines


def _stack(parts: list[tuple[np.ndarray, ...]], axis: int | tuple[int, ...]) -> tuple[Any, ...]:
    """Each output's slices stacked along `axis` (one for all, or each output's)."""
    axes = axis if isinstance(axis, tuple) else (axis,) * len(parts[0])
    return tuple(
        np.stack(outs, axis=a) for outs, a in zip(zip(*parts, strict=True), axes, strict=True)
    )


def _grad(spec: OpSpec, fn: Callable[..., Any], cotangents: list[Any]) -> Callable[..., Any]:
    """The gradient with respect to the differentiable arguments, as a function of all."""
    return jax.grad(_loss(spec, fn, cotangents), argnums=tuple(_diff_args(spec)))


def _grad_of(spec: OpSpec, fn: Callable[..., Any], count: int) -> Callable[..., Any]:
    """The gradient of fn's random weighting, as a function of its `count`
    arguments followed by the cotangents."""

    def grad(*args_and_cts: Any) -> Any:
        return _grad(spec, fn, list(args_and_cts[count:]))(*args_and_cts[:count])

    return grad


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
