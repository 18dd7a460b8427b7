"""The control-flow cells: checkpoint, scan and cond."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .declaration import NEW_AXIS, OpSpec
from .oracles import (
    _batched,
    _float,
    _grad,
    _stack,
    assert_grads,
    assert_outputs,
    cotangents_for,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import call_as_declared


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
        batch = {"batched": stacked, "in_axes": [0] * len(stacked), "out_axes": 0}
        assert_outputs(spec, got, want, "jit(scan), scanned axis first", **batch)
        stacked_cts = [jnp.stack(c) for c in zip(*cts, strict=True)]
        got = call_as_declared(jax.jit(_grad(spec, scanned, stacked_cts)), *stacked)
        wants = [vjp_oracle(spec, s, c) for s, c in zip(slices, cts, strict=True)]
        want_grads = [np.stack(w) for w in zip(*wants, strict=True)]
        assert_grads(spec, got, want_grads, "jit(grad(scan)), scanned axis first", **batch)
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
    assert_outputs(spec, program(*poisoned), zeros, "jit(cond), the zeros' branch", shown=poisoned)
    zero_grads = [np.zeros_like(w) for w in want]
    where = "jit(grad(cond)), the zeros' branch"
    assert_grads(spec, gradient(*poisoned), zero_grads, where, shown=poisoned)


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
