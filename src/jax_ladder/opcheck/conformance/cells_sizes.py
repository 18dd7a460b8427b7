"""The size cells: size-<d>-0 (an empty axis: an empty batch, no features),
size-<d>-1, size-<d>-ragged and size-<d>-large; and, for
an op whose arguments have leading axes ("..."), size-...-0 and size-...-2:
none, and two (LEADING_RANKS)."""

from __future__ import annotations

import math

import jax
import numpy as np

from .declaration import LARGE, OpSpec, derived
from .oracles import (
    _diff_args,
    _grad,
    _outputs,
    assert_grads,
    assert_outputs,
    cotangents_for,
    ill_conditioned,
    make_args,
    oracle,
    vjp_oracle,
)
from .results import call_as_declared
from .signature import expand_leading
from .validation import LEADING

# size-...-<rank>: the leading axes' sizes, where the declaration has "...":
# none (the op on its named axes alone), and two of them.
LEADING_RANKS = {"0": (), "2": (2, 3)}


def cell_size(spec: OpSpec, axis: str, kind: str) -> int:
    """The size a size-<axis>-<kind> cell gives the axis: 1; ragged, the
    smallest prime above the declared size and 4 (a multiple of no block the
    declared size suggests, nor of any mesh's shard count); large, LARGE
    times the declared size."""
    declared = spec.sizes[axis]
    if kind in ("0", "1"):
        return int(kind)
    if kind == "large":
        return LARGE * declared
    candidate = max(declared, 4) + 1
    while any(candidate % d == 0 for d in range(2, math.isqrt(candidate) + 1)):
        candidate += 1
    return candidate


def check_size(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    """One axis at size 1, at a ragged size or at several times its declared
    size (a kernel's grid rounding down leaves a ragged tail unwritten; a row
    of one takes another path): jitted values and gradient against the oracle.
    size-...-<rank>: the leading axes "..." stands for, at LEADING_RANKS[rank]
    (run_cell hands this cell the declaration with "..." unexpanded)."""
    axis, kind = cell.removeprefix("size-").rsplit("-", 1)
    if axis == LEADING:
        lead = LEADING_RANKS[kind]
        spec = expand_leading(derived(spec, sizes={**spec.sizes, LEADING: lead}))
        args = make_args(spec, rng)
        where = f"leading axes {lead}"
    else:
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
