"""The autodiff cells: grad-<arg>, vjp, jit-grad, jvp, linearize, jacfwd,
vmap-jvp, check-grads-1 and check-grads-2."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

from ..compare import assert_close, at_platform, platform_of, summary

# isort: split
from .declaration import NEW_AXIS, OpSpec, refusal
from .oracles import (
    _CPU,
    _diff_args,
    _diff_outputs,
    _float,
    _grad,
    _inputs_at,
    _inputs_shown,
    _insert,
    _loss,
    _of_diff,
    _outputs,
    _stack,
    _to64,
    assert_grads,
    assert_outputs,
    cotangents_for,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import assert_deterministic, call_as_declared


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
        shown = _inputs_shown(spec, inputs, None, spec.outputs[k])
        said = f"{where}, tangent of output {k}"
        assert_close(g, w, tolerance, where=said, inputs_at=at, details=shown)


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
    assert_grads(spec, got, want, where=where, shown=args)


def check_grads_cell(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """JAX's numerical check against finite differences, in float64: forward
    and reverse mode unless the jvp cell is refused (then reverse only). The
    op is jitted: the check evaluates it dozens of times, and eagerly a
    multi-device op compiles again at each (the eager and grad cells cover
    eager calls)."""
    # An op that takes no float64 (OpSpec.float64=False) is checked in float32.
    args = make_args(spec, rng, "float64" if spec.float64 else "float32")
    # An op that computes in a narrower float inside (x.astype(float32), the
    # usual way to keep bfloat16 stable) has float32 rounding noise in its
    # float64 results: finite differences at float64's tolerance fail it
    # for what it is. It is checked in float32, at float32's tolerance.
    dtype = _narrowest_float(spec.op, args) if spec.float64 else "float32"
    if dtype != "float64":
        args = make_args(spec, rng, "float32")
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
        # A central difference's step where float32 rounding and truncation
        # balance (about the cube root of its epsilon); float64's: JAX's default.
        eps = {"float32": 1e-2}.get(dtype)
        check_grads(
            jax.jit(of_diff), [args[i] for i in diff], order=order, modes=modes, eps=eps or 1e-4
        )
    except AssertionError as error:
        # check_grads' own message opens with an empty line: its gist, on one.
        gist = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        inputs = [f"  input {summary(a.name, v)}" for a, v in zip(spec.args, args, strict=True)]
        raise AssertionError(
            "\n".join(
                [
                    f"check_grads(order={order}, modes={modes}) in {_said_dtype(dtype, spec)}, "
                    "against finite "
                    f"differences: {gist}",
                    *inputs,
                ]
            )
        ) from error


def _narrowest_float(fn: Callable[..., Any], args: list[Any]) -> str:
    """The narrowest floating dtype fn computes in on these (float64)
    arguments: any value of its jaxpr, its inner jaxprs' too, narrower than
    float64 makes it "float32" (narrower still is the op's own tolerance's
    business, not finite differences'); else "float64"."""
    narrow = False

    def walk(jaxpr: Any) -> None:
        nonlocal narrow
        for eqn in jaxpr.eqns:
            for var in eqn.outvars:
                dtype = getattr(var.aval, "dtype", None)
                if dtype is not None and _float(dtype) and jnp.finfo(dtype).bits < 64:
                    narrow = True
            for param in eqn.params.values():
                for sub in param if isinstance(param, (tuple, list)) else (param,):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    try:
        walk(jax.make_jaxpr(fn)(*args).jaxpr)
    except Exception:  # the check itself says what the op raises
        return "float64"
    return "float32" if narrow else "float64"


def _said_dtype(dtype: str, spec: OpSpec) -> str:
    if dtype == "float64":
        return "float64"
    if not spec.float64:
        return "float32 (the op takes no float64: OpSpec.float64=False)"
    return "float32 (the op computes in float32 inside, so float64's tolerance cannot hold it)"
