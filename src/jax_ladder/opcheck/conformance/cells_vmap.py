"""The vmap cells: vmap-new-axis, vmap-only-<arg>, vmap-only-<arg>-inner,
vmap-mixed, vmap-apart, vmap-apart-reversed, vmap-nested, vmap-of-grad,
vmap-of-grad-inner, vmap-of-grad-only-<arg>, vmap-of-grad-apart,
vmap-axis-<d> and vmap-sharded-new-axis."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from .cells_sharding import _mesh, assert_same_shardings
from .declaration import NEW_AXIS, OpSpec
from .oracles import (
    _batched,
    _grad,
    _grad_of,
    _insert,
    _outputs,
    _slice,
    _stack,
    assert_grads,
    assert_outputs,
    cotangents_for,
    drawn,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import call_as_declared


def apart_axes(args: list[Any], reversed_: bool = False) -> list[int]:
    """Every argument batched, no two on the same axis where their ranks
    allow: the i-th on axis i (or its last), or, reversed, the first on its
    last axis and the i-th i axes before it. A batching rule that assumes
    its operands share a batch axis (moves one and indexes the other) is
    off here and nowhere else."""
    if reversed_:
        return [max(a.ndim - i, 0) for i, a in enumerate(args)]
    return [min(i, a.ndim) for i, a in enumerate(args)]


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
        inner = name.endswith("-inner")
        name = name.removesuffix("-inner")
        # -inner: the new axis last in that argument, none of the others batched
        in_axes = [
            (a.ndim if inner else 0) if s.name == name else None
            for a, s in zip(args, spec.args, strict=True)
        ]
        where = f"vmap of {name} alone" + (", on its last axis" if inner else "")
        _check_batched(spec, args, in_axes, 0, rng, where)
    elif cell in ("vmap-apart", "vmap-apart-reversed"):
        in_axes = apart_axes(args, reversed_=cell.endswith("-reversed"))
        _check_batched(
            spec, args, in_axes, 0, rng, f"vmap, each argument on its own axis {in_axes}"
        )
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
        where = "vmap(vmap), outer axis first"
        assert_outputs(spec, got, _stack(parts, axis=0), where, batched=batched)
    elif cell.startswith("vmap-of-grad"):
        _check_vmap_of_grad(spec, cell, args, rng)
    elif cell == "vmap-sharded-new-axis":
        _check_vmap_sharded(spec, rng)
    else:  # vmap-axis-<d>: vmap over one of the op's own batch axes
        axis = cell.removeprefix("vmap-axis-")
        in_axes = [a.axes.index(axis) if axis in a.axes else None for a in spec.args]
        out_axes = [o.index(axis) if axis in o else None for o in spec.outputs]
        out = out_axes[0] if len(out_axes) == 1 else tuple(out_axes)
        drawn("vmap", args, in_axes=in_axes, out_axes=out)
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
    drawn("vmap", batched, in_axes=in_axes, out_axes=out)
    got = call_as_declared(jax.vmap(spec.op, in_axes=in_axes, out_axes=out), *batched)
    parts = [oracle(spec, _slice(batched, in_axes, i)) for i in range(NEW_AXIS)]
    batch = {"batched": batched, "in_axes": in_axes, "out_axes": out}
    assert_outputs(spec, got, _stack(parts, out), where, **batch)


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
    elif cell == "vmap-of-grad-apart":
        in_axes = list(apart_axes(args, reversed_=True))
        out_axes, where = 0, f"jit(vmap(grad)), each argument on its own axis {in_axes}"
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
    assert_grads(spec, got, want, where, batched=batched, in_axes=in_axes, out_axes=out_axes)


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
    batch = {"batched": batched, "in_axes": [0] * len(batched), "out_axes": 0}
    assert_outputs(spec, got, want, "jit(vmap), batch axis first", **batch)
    assert_same_shardings(got, jax.vmap(spec.reference), placed)
    got_grads = call_as_declared(jax.jit(_grad_of(spec, mapped, len(placed))), *placed, *ct_placed)
    want_grads = [np.stack(w) for w in zip(*wants, strict=True)]
    assert_grads(spec, got_grads, want_grads, "jit(grad(vmap)), batch axis first", **batch)
