"""How each argument's values are drawn, as its Arg declares: its own sample;
a bool's both values, with whole rows of each; an integer's range at the
cell's sizes, both edges included; a floating one's standard normals mapped
into its domain. oracles.make_args and the new axes of the vmap cells draw
through draw()."""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from .declaration import Arg
from .validation import bound_value


def draw(
    arg: Arg,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    sizes: Mapping[str, int] | None = None,
) -> np.ndarray:
    """An argument's values: its own sample; a bool's both values, with
    whole rows of each; an integer's across its range at these sizes; else
    standard normals mapped into its domain (magnitudes for a positive-only
    one, clipped to a bounded one) and held to its smallest nonzero
    magnitude."""
    if arg.sample is not None:
        return np.asarray(arg.sample(rng, tuple(shape)))
    if arg.dtype is not None and np.dtype(jnp.dtype(arg.dtype)) == np.bool_:
        return _bools(rng, tuple(shape))
    if arg.range is not None:
        return _integers(arg, rng, tuple(shape), sizes or {})
    return _into_domain(arg, rng.standard_normal(shape))


def _bools(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Both values at random; where there are two rows or more (slices along
    the last axis), the first all False and the second all True: a fully
    masked row, and one masking nothing."""
    values = rng.random(shape) < 0.5
    if len(shape) >= 2 and math.prod(shape[:-1]) >= 2:
        rows = values.reshape(-1, shape[-1])
        rows[0], rows[1] = False, True
    elif values.size >= 2:  # one row: both values somewhere in it
        flat = values.reshape(-1)
        flat[rng.choice(values.size, 2, replace=False)] = [False, True]
    return values


def _integers(
    arg: Arg, rng: np.random.Generator, shape: tuple[int, ...], sizes: Mapping[str, int]
) -> np.ndarray:
    """Uniform over the argument's range [low, high) at these sizes, with
    both edges somewhere where there are two elements (sorted along the last
    axis where the Arg says). An empty range with elements to fill is an
    AssertionError naming the sizes (a size-<d>-* cell of an index axis)."""
    assert arg.range is not None
    low, high = (bound_value(b, sizes) for b in arg.range)
    if math.prod(shape) == 0:
        return np.zeros(shape, np.int64)
    assert low < high, (
        f"arg {arg.name!r}: its range {arg.range} is empty at these sizes ([{low}, {high})), "
        "so it has no value to draw"
    )
    values = rng.integers(low, high, shape)
    if values.size >= 2:
        flat = values.reshape(-1)
        flat[rng.choice(values.size, 2, replace=False)] = [low, high - 1]
    return np.sort(values, axis=-1) if arg.sorted and values.ndim else values


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
