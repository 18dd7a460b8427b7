"""The values cells: eager, jit and jit-donate."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .declaration import OpSpec
from .hlo import _aliased
from .oracles import assert_outputs, make_args, oracle
from .results import (
    _assert_none_consumed,
    assert_as_declared,
    assert_as_reference,
    assert_deterministic,
    call_as_declared,
)


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
