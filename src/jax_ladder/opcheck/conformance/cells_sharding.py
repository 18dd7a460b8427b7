"""The sharding cells: shard_map (shard-map-*), jit with sharded inputs
(jit-auto-*, jit-explicit-*) and second order on an explicit mesh
(grad-grad-explicit-*)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from ..devices import mesh_devices

# isort: split
from .declaration import MESHES, NEW_AXIS, OpSpec, derived
from .hlo import assert_collectives
from .oracles import (
    _CPU,
    _diff_args,
    _diff_outputs,
    _grad,
    _grad_of,
    _insert,
    _outputs,
    _to64,
    assert_grads,
    assert_outputs,
    cotangents_for,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import call_as_declared


# --- shard_map -----------------------------------------------------------------------
def _mesh(kind: str, axis_type: AxisType = AxisType.Auto, size: int | None = None) -> Any:
    """The mesh of MESHES[kind]; for "1d" splitting an axis of `size`, as
    many devices (4, 3 or 2) as divide it: three channels split three ways."""
    shape, names = MESHES[kind]
    if kind == "1d" and size is not None:
        shape = (mesh_size(size),)
    count = int(np.prod(shape))
    return jax.make_mesh(
        shape, names, axis_types=(axis_type,) * len(shape), devices=mesh_devices(count)
    )


def mesh_size(size: int) -> int:
    """The devices a 1-D mesh splitting an axis of `size` has: 4 where it
    divides the size, else 3 or 2; a size none divides (1, a prime above 3)
    is a failure saying which sizes work (a shrunk declaration may have one:
    only the cells that split it care)."""
    count = next((n for n in (MESHES["1d"][0][0], 3, 2) if size % n == 0), None)
    assert count is not None, (
        f"an axis of size {size} splits evenly over no mesh of 4, 3 or 2 devices: declare "
        f"a size one of them divides ({size + 1}, say), or refuse this cell"
    )
    return count


def _specs(
    axes_list: Any, axis: str | tuple[str, ...], mesh_axis: str | tuple[str, ...] | None = "x"
) -> list[P]:
    """Each array's spec with `mesh_axis` on its dimension named `axis`; given
    several names, on the first of them the array has (a spec names a mesh
    axis once)."""
    names = (axis,) if isinstance(axis, str) else axis
    specs = []
    for axes in axes_list:
        # The first dimension so named only: a square x[n,n] splits its rows.
        first = next((i for i, a in enumerate(axes) if a in names), None)
        specs.append(P(*(mesh_axis if i == first else None for i in range(len(axes)))))
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
    axis_type = AxisType.Explicit if explicit else AxisType.Auto
    mesh = _mesh("2d" if two_d else "1d", axis_type, None if two_d else spec.sizes[axis[0]])
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


# --- Second order on an explicit mesh -------------------------------------------------
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
    mesh = _mesh("1d", AxisType.Explicit, spec.sizes.get(axis))
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
    held = derived(spec, gradient_tolerance=tolerance)
    where = "jit(grad(grad(vmap)))" if batched else "jit(grad(grad))"
    inputs = {"batched": args} if batched else {"inputs": args}
    assert_grads(held, got, [np.asarray(w) for w in want], where=where, **inputs)
