"""What every cell holds its results to besides the oracle's values: their
abstract result (jax.eval_shape's shapes, dtypes and typed shardings, and
the op's against the reference's), the same bits on a second run, and no
input consumed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from ..compare import platform_of

# isort: split
from .declaration import OpSpec
from .oracles import _outputs


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
