"""A declaration checked when it is made: every field of an OpSpec (and of
its Args, Refuses and Collectives) is validated in its __post_init__, and a
mistake raises DeclarationError, one line that names the field and the fix,
instead of a KeyError or AttributeError in every cell later.

check_declaration(spec), run once per declaration before its first cell,
draws inputs once and holds the reference's and the oracle's results to the
declared `outputs=` (their number and shapes), so that a wrong declaration
or oracle is named as such, not blamed on the op.

Leading axes: an Arg's axes (or an output's) may begin with LEADING, "...",
any number of leading axes (an elementwise or row-wise op, which must accept
any rank); the cells draw them at the sizes tuple sizes["..."] (default
DEFAULT_LEADING)."""

from __future__ import annotations

import difflib
import fnmatch
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

LEADING = "..."  # as an Arg's first axis: any leading axes
DEFAULT_LEADING = (3,)  # the leading axes' sizes where sizes has no "..."


class DeclarationError(ValueError):
    """A mistake in a declaration (OpSpec, Arg, Refuse, Collectives,
    signature=): one line naming the field and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split("\n")))


# --- Shapes with leading axes -----------------------------------------------------
def leading_sizes(sizes: Mapping[str, Any]) -> tuple[int, ...]:
    """The sizes of the axes LEADING stands for."""
    return tuple(sizes.get(LEADING, DEFAULT_LEADING))


def shape_of(axes: tuple[str, ...], sizes: Mapping[str, Any]) -> tuple[int, ...]:
    """The shape of an argument or output with these axes: LEADING expanded
    to the leading sizes."""
    shape: list[int] = []
    for axis in axes:
        shape += leading_sizes(sizes) if axis == LEADING else [sizes[axis]]
    return tuple(shape)


def is_named(axis: str) -> bool:
    """A named axis, not LEADING nor one of the axes it stands for in a cell."""
    return not axis.startswith(LEADING)


# --- Field checks ---------------------------------------------------------------------
def _dtype(name: Any) -> Any:
    """The NumPy dtype a dtype name names (bfloat16 and the other ml_dtypes
    too), or None."""
    if not isinstance(name, str):
        return None
    import jax.numpy as jnp

    try:
        return jnp.dtype(name)
    except TypeError:
        return None


def _floating(name: Any) -> bool:
    """A floating (or complex: inexact) dtype's name, which has gradients."""
    import jax.numpy as jnp

    found = _dtype(name)
    return found is not None and bool(jnp.issubdtype(found, jnp.inexact))


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _axes_tuple(owner: str, what: str, axes: Any, example: str) -> tuple[str, ...]:
    """axes as a tuple of axis names (a list is taken); a string, or an
    element that is no name, is a mistake."""
    if isinstance(axes, str) or not isinstance(axes, (tuple, list)):
        raise DeclarationError(
            f"{owner}: {what} must be a tuple of axis names, e.g. {example}, not {axes!r}"
        )
    for axis in axes:
        if not isinstance(axis, str):
            raise DeclarationError(
                f"{owner}: {what} {tuple(axes)!r} holds {axis!r}, not an axis name; "
                f"write e.g. {example}"
            )
    return tuple(axes)


def _axis_names(owner: str, what: str, axes: tuple[str, ...]) -> None:
    """Each axis a Python identifier (it is part of cell names: size-<d>-1),
    LEADING only first."""
    for i, axis in enumerate(axes):
        if axis == LEADING:
            if i:
                raise DeclarationError(
                    f"{owner}: {what} {axes!r} has '...' at position {i}; it may only "
                    "come first (any leading axes)"
                )
        elif not axis.isidentifier():
            raise DeclarationError(
                f"{owner}: {what} {axes!r} has the axis name {axis!r}; name axes with "
                "identifiers (letters, digits, _), as they become part of cell names"
            )


def check_arg(arg: Any) -> None:
    """An Arg's fields (its axes made a tuple where a list was given)."""
    if not isinstance(arg.name, str) or not arg.name.isidentifier():
        raise DeclarationError(
            f"Arg {arg.name!r}: name must be an identifier (it is part of cell names: "
            "grad-<name>), e.g. Arg('x', ('n',))"
        )
    owner = f"Arg {arg.name!r}"
    axes = _axes_tuple(owner, "axes", arg.axes, "('b', 'n'), or () for a scalar")
    _axis_names(owner, "axes", axes)
    object.__setattr__(arg, "axes", axes)
    if not isinstance(arg.differentiable, bool):
        raise DeclarationError(
            f"{owner}: differentiable must be True or False, not {arg.differentiable!r}"
        )
    if arg.dtype is not None:
        if _dtype(arg.dtype) is None:
            raise DeclarationError(
                f"{owner}: dtype {arg.dtype!r} is no dtype name; write e.g. dtype='int32' "
                "(None: the spec's floating dtype)"
            )
        if arg.differentiable and not _floating(arg.dtype):
            raise DeclarationError(
                f"{owner}: dtype {arg.dtype!r} is not floating, so it has no gradient; "
                "add differentiable=False"
            )
    _check_range(owner, arg)
    if arg.sample is not None and not callable(arg.sample):
        raise DeclarationError(
            f"{owner}: sample must be a function (rng, shape) -> float64 array, not "
            f"{type(arg.sample).__name__}"
        )
    domain = arg.domain
    if (
        not isinstance(domain, (tuple, list))
        or len(domain) != 2
        or not all(_number(v) for v in domain)
        or math.isnan(domain[0])
        or math.isnan(domain[1])
        or domain[0] > domain[1]
    ):
        raise DeclarationError(
            f"{owner}: domain must be (lo, hi) with lo <= hi, e.g. domain=(0.0, math.inf), "
            f"not {domain!r}"
        )
    object.__setattr__(arg, "domain", (domain[0], domain[1]))
    if not _number(arg.smallest) or not arg.smallest >= 0:
        raise DeclarationError(
            f"{owner}: smallest must be a number >= 0 (the smallest nonzero magnitude "
            f"supported; 0: subnormals too), not {arg.smallest!r}"
        )


# A bound of Arg.range: an int, or an axis name with an optional +k or -k.
_BOUND = re.compile(r"^([A-Za-z_]\w*)\s*(?:([+-])\s*(\d+))?$")


def bound_value(bound: int | str, sizes: Mapping[str, Any]) -> int:
    """A range bound's value at these axis sizes."""
    if isinstance(bound, int):
        return bound
    found = _BOUND.match(bound)
    assert found is not None, bound  # check_arg saw to it
    name, sign, k = found.groups()
    return int(sizes[name]) + (int(k) if sign == "+" else -int(k) if sign else 0)


def range_axes(arg: Any) -> list[str]:
    """The axes an argument's range bounds name."""
    bounds = arg.range or ()
    return [_BOUND.match(b).group(1) for b in bounds if isinstance(b, str)]  # type: ignore[union-attr]


def _check_range(owner: str, arg: Any) -> None:
    """An integer argument's range (or sample), a bool's none, a float's none."""
    import jax.numpy as jnp

    dtype = _dtype(arg.dtype) if arg.dtype is not None else None
    integer = dtype is not None and jnp.issubdtype(dtype, jnp.integer)
    if arg.range is None:
        if integer and arg.sample is None:
            raise DeclarationError(
                f"{owner}: an {arg.dtype} argument needs the values it takes: "
                f"{arg.name}[...]:{arg.dtype}[0,n) in signature=, or range=(0, 'n') on the Arg "
                "(bounds: ints or axis names, n+1 too), or a sample="
            )
        return
    if not integer:
        raise DeclarationError(
            f"{owner}: range is for integer arguments (dtype='int32', say); a floating "
            "one declares domain=(lo, hi), a bool one neither"
        )
    bounds = arg.range
    if (
        not isinstance(bounds, (tuple, list))
        or len(bounds) != 2
        or not all(
            (isinstance(b, int) and not isinstance(b, bool))
            or (isinstance(b, str) and _BOUND.match(b))
            for b in bounds
        )
    ):
        raise DeclarationError(
            f"{owner}: range must be (low, high), half-open, each an int or an axis name "
            f"('n', 'n+1', 'n-1'), e.g. range=(0, 'n'), not {bounds!r}"
        )
    object.__setattr__(arg, "range", (bounds[0], bounds[1]))
    if arg.sorted not in (True, False):
        raise DeclarationError(f"{owner}: sorted must be True or False, not {arg.sorted!r}")


def check_refuse(refuse: Any) -> None:
    errors = refuse.error if isinstance(refuse.error, tuple) else (refuse.error,)
    # A class, or a class's name: JAX keeps some errors private
    # (ShardingTypeError lives in jax._src.core), matched by name.
    if not errors or not all(
        (isinstance(e, type) and issubclass(e, BaseException))
        or (isinstance(e, str) and e.isidentifier())
        for e in errors
    ):
        raise DeclarationError(
            f"Refuse: error must be an exception class, a class's name (for JAX's private "
            f"ones: 'ShardingTypeError') or a tuple of them, e.g. "
            f"Refuse(TypeError, 'can.t', why), not {refuse.error!r}"
        )
    if not isinstance(refuse.match, str):
        raise DeclarationError(
            f"Refuse: match must be a regex string (the error message's), not {refuse.match!r}"
        )
    try:
        re.compile(refuse.match)
    except re.error as error:
        raise DeclarationError(
            f"Refuse: match {refuse.match!r} is not a regular expression ({error}); "
            "escape a literal message with re.escape(...)"
        ) from None
    if not isinstance(refuse.why, str) or not refuse.why.strip():
        raise DeclarationError(
            "Refuse: why must say, for the support table, why the cell is refused and what "
            f"to use instead, not {refuse.why!r}"
        )


def check_collectives(collectives: Any, names: tuple[str, ...]) -> None:
    if not isinstance(collectives.why, str) or not collectives.why.strip():
        raise DeclarationError(
            "Collectives: why must say, for the support table, why the program communicates "
            f"otherwise than the reference's, not {collectives.why!r}"
        )
    if not isinstance(collectives.at_most, bool):
        raise DeclarationError(
            f"Collectives: at_most must be True (the counts are upper bounds) or False "
            f"(exact), not {collectives.at_most!r}"
        )
    if collectives.forward is None and collectives.gradient is None:
        raise DeclarationError(
            "Collectives: declare a program: forward={...} or gradient={...} "
            "(e.g. gradient={'all-gather': 1})"
        )
    for program in ("forward", "gradient"):
        counts = getattr(collectives, program)
        if counts is None:
            continue
        if not isinstance(counts, Mapping):
            raise DeclarationError(
                f"Collectives: {program} must map collectives to counts, e.g. "
                f"{program}=" + "{'all-gather': 1}" + f", not {counts!r}"
            )
        for name, count in counts.items():
            if name not in names:
                close = difflib.get_close_matches(str(name), names, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"they are {names}"
                raise DeclarationError(
                    f"Collectives: {program} names {name!r}, not a collective; {hint}"
                )
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise DeclarationError(
                    f"Collectives: {program}[{name!r}] must be a count (an int >= 0), not {count!r}"
                )


def _ulps(owner: str, field: str, value: Any, optional: bool = False) -> None:
    from ..compare import Ulps

    if value is None and optional:
        return
    if not isinstance(value, Ulps):
        missing = " is missing" if value is None else f"={value!r} is not an Ulps"
        raise DeclarationError(
            f"{owner}: {field}{missing}; it must be an Ulps, e.g. {field}=Ulps(4) (4 ulps "
            f"of each value) or Ulps(4, 8) (and 8 ulps of the outputs' scale)"
        )
    for part in ("at_value", "at_scale", "at_inputs"):
        count = getattr(value, part)
        if not _number(count) or not count >= 0:
            raise DeclarationError(
                f"{owner}: {field}.{part} must be a number of ulps >= 0, not {count!r}"
            )


def _callable(owner: str, field: str, value: Any, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise DeclarationError(
            f"{owner}: {field} must be a function (called with the op's arguments), not "
            f"{type(value).__name__} {value!r}"[:300]
        )


def _mapping(owner: str, field: str, value: Any, example: str) -> None:
    if not isinstance(value, Mapping):
        raise DeclarationError(f"{owner}: {field} must be a dict, e.g. {field}={example}")


def _axes_field(owner: str, field: str, value: Any, axes: tuple[str, ...]) -> tuple[str, ...]:
    example = f"{field}=({axes[0]!r},)" if axes else f"{field}=()"
    value = _axes_tuple(owner, field, value, example)
    for axis in value:
        if axis not in axes:
            raise DeclarationError(
                f"{owner}: {field} names the axis {axis!r}, which no argument has; "
                f"the named axes are {axes}"
            )
    return value


def _did_you_mean(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}?"
    return f"cell_names(spec) lists the cells ({', '.join(names[:4])}, ...)"


def check_spec(spec: Any) -> None:
    """Every field of an OpSpec whose args and outputs are filled (the
    signature parsed). Normalises lists given for tuples."""
    from ..compare import MATMUL_INPUT_BITS

    # isort: split
    from .declaration import Arg, Collectives, Refuse

    if not isinstance(spec.name, str) or not spec.name.strip():
        raise DeclarationError(f"OpSpec: name must be the op's name, a string, not {spec.name!r}")
    owner = f"OpSpec {spec.name!r}"
    _callable(owner, "op", spec.op)
    _callable(owner, "reference", spec.reference)
    _callable(owner, "oracle", spec.oracle, optional=True)
    _callable(owner, "auto_op", spec.auto_op, optional=True)
    _callable(owner, "gradient_oracle", spec.gradient_oracle, optional=True)

    # args
    if isinstance(spec.args, Arg):
        raise DeclarationError(
            f"{owner}: args must be a tuple of Arg; write args=({spec.args!r},) (the comma)"
        )
    if not isinstance(spec.args, (tuple, list)) or not spec.args:
        raise DeclarationError(
            f"{owner}: args must be a non-empty tuple of Arg, e.g. args=(Arg('x', ('n',)),), "
            "or give signature='x[n] -> [n]'"
        )
    for i, arg in enumerate(spec.args):
        if not isinstance(arg, Arg):
            raise DeclarationError(
                f"{owner}: args[{i}] is {arg!r}, not an Arg; write Arg('x', ('b', 'n'))"
            )
    object.__setattr__(spec, "args", tuple(spec.args))
    seen: set[str] = set()
    for arg in spec.args:
        if arg.name in seen:
            raise DeclarationError(
                f"{owner}: two args are named {arg.name!r}; give each argument its own name"
            )
        seen.add(arg.name)

    # outputs
    outputs = spec.outputs
    if not isinstance(outputs, (tuple, list)) or not outputs:
        raise DeclarationError(
            f"{owner}: outputs must be a non-empty tuple with each output's axes, e.g. "
            f"outputs=(('b', 'n'),), not {outputs!r}"
        )
    if all(isinstance(o, str) for o in outputs):
        raise DeclarationError(
            f"{owner}: outputs must be a tuple of axis-name tuples, one per output: write "
            f"outputs=({tuple(outputs)!r},), not {tuple(outputs)!r}"
        )
    outputs = tuple(
        _axes_tuple(owner, f"outputs[{k}]", o, "('b', 'n'), or () for a scalar")
        for k, o in enumerate(outputs)
    )
    for k, o in enumerate(outputs):
        _axis_names(owner, f"outputs[{k}]", o)
    object.__setattr__(spec, "outputs", outputs)

    # sizes
    _mapping(owner, "sizes", spec.sizes, "{'n': 16}")
    for axis, size in spec.sizes.items():
        if axis == LEADING:
            ok = isinstance(size, (tuple, list)) and all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size
            )
            if not ok:
                raise DeclarationError(
                    f"{owner}: sizes['...'] must be a tuple of positive ints (the leading "
                    "axes' sizes), e.g. sizes={..., '...': (3,)}" + f", not {size!r}"
                )
        elif not isinstance(size, numbers.Integral) or isinstance(size, bool) or size <= 0:
            raise DeclarationError(f"{owner}: sizes[{axis!r}] must be a positive int, not {size!r}")
    used = [(a.name, axis) for a in spec.args for axis in a.axes]
    used += [(f"output {k}", axis) for k, o in enumerate(outputs) for axis in o]
    for user, axis in used:
        if axis != LEADING and axis not in spec.sizes:
            who = f"arg {user!r}" if not user.startswith("output ") else user
            raise DeclarationError(
                f"{owner}: sizes has no size for axis {axis!r} (used by {who}); add "
                "sizes={..., " + f"{axis!r}: 8" + "}"
            )
    for arg in spec.args:
        for axis in range_axes(arg):
            if axis not in spec.sizes or axis == LEADING:
                raise DeclarationError(
                    f"{owner}: arg {arg.name!r}'s range names {axis!r}, which is no axis with a "
                    f"size; the axes are {sorted(a for a in spec.sizes if a != LEADING)}"
                )
    has_leading = any(a.axes[:1] == (LEADING,) for a in spec.args)
    for k, o in enumerate(outputs):
        if o[:1] == (LEADING,) and not has_leading:
            raise DeclarationError(
                f"{owner}: outputs[{k}] {o!r} starts with '...', but no argument does; "
                "declare the leading axes on the arguments too, e.g. 'x[...,n] -> [...,n]'"
            )

    # tolerances
    _ulps(owner, "tolerance", spec.tolerance)
    _ulps(owner, "gradient_tolerance", spec.gradient_tolerance)
    _ulps(owner, "second_order_tolerance", spec.second_order_tolerance, optional=True)

    # dtypes
    if not _floating(spec.dtype):
        raise DeclarationError(
            f"{owner}: dtype {spec.dtype!r} is not a floating dtype name; write e.g. "
            "dtype='float32' (or 'bfloat16', 'float16', 'float64')"
        )
    if spec.dtypes is not None:
        if isinstance(spec.dtypes, str) or not isinstance(spec.dtypes, (tuple, list)):
            raise DeclarationError(
                f"{owner}: dtypes must be a tuple of dtype names, e.g. "
                f"dtypes=('float32', 'bfloat16'), not {spec.dtypes!r}"
            )
        for dtype in spec.dtypes:
            if not _floating(dtype):
                raise DeclarationError(
                    f"{owner}: dtypes holds {dtype!r}, not a floating dtype name; write e.g. "
                    "dtypes=('float32', 'bfloat16')"
                )
        object.__setattr__(spec, "dtypes", tuple(spec.dtypes))

    # axes named elsewhere
    axes = spec.axes
    object.__setattr__(spec, "batch_axes", _axes_field(owner, "batch_axes", spec.batch_axes, axes))
    object.__setattr__(
        spec, "shard_map_axes", _axes_field(owner, "shard_map_axes", spec.shard_map_axes, axes)
    )
    if spec.symbolic_axis is not None and spec.symbolic_axis not in axes:
        raise DeclarationError(
            f"{owner}: symbolic_axis {spec.symbolic_axis!r} is no argument's axis; "
            f"the named axes are {axes}"
        )
    if spec.differentiable_outputs is not None:
        picked = spec.differentiable_outputs
        if not isinstance(picked, (tuple, list)) or not all(
            isinstance(i, int) and 0 <= i < len(outputs) for i in picked
        ):
            raise DeclarationError(
                f"{owner}: differentiable_outputs must be a tuple of output indices below "
                f"{len(outputs)}, e.g. (0,), not {picked!r}"
            )
        object.__setattr__(spec, "differentiable_outputs", tuple(picked))

    if not isinstance(spec.float64, bool):
        raise DeclarationError(
            f"{owner}: float64 must be True or False (the op takes no float64: "
            f"check-grads-* compute in float32), not {spec.float64!r}"
        )
    if not isinstance(spec.finite, bool):
        raise DeclarationError(
            f"{owner}: finite must be True (the op supports finite inputs only) or False, "
            f"not {spec.finite!r}"
        )

    # the mappings
    _mapping(owner, "platforms", spec.platforms, "{'cpu': ''}")
    _mapping(owner, "matmul_inputs", spec.matmul_inputs, "{'tpu': 'bfloat16'}")
    for platform, kept in spec.matmul_inputs.items():
        if kept not in MATMUL_INPUT_BITS:
            raise DeclarationError(
                f"{owner}: matmul_inputs[{platform!r}] is {kept!r}; it must be one of "
                f"{tuple(MATMUL_INPUT_BITS)}"
            )
    _mapping(owner, "nondeterministic", spec.nondeterministic, "{'gpu': 'why'}")
    _mapping(owner, "refuse", spec.refuse, "{'jvp': Refuse(...)}")
    _mapping(owner, "ill_conditioned", spec.ill_conditioned, "{'size-n-1': 'why'}")
    _mapping(owner, "extra_collectives", spec.extra_collectives, "{'jit-auto-n': Collectives(...)}")
    for key, value in spec.refuse.items():
        if not isinstance(value, Refuse):
            raise DeclarationError(
                f"{owner}: refuse[{key!r}] is {type(value).__name__}, not a Refuse; write "
                "Refuse(error, match, why)"
            )
    for key, value in spec.extra_collectives.items():
        if not isinstance(value, Collectives):
            raise DeclarationError(
                f"{owner}: extra_collectives[{key!r}] is {type(value).__name__}, not a "
                "Collectives; write Collectives(why, forward=..., gradient=...)"
            )

    # every cell name or glob names a cell
    from . import cell_names

    names = cell_names(spec)
    for field in ("refuse", "ill_conditioned", "extra_collectives"):
        for key in getattr(spec, field):
            if not isinstance(key, str) or not fnmatch.filter(names, key):
                raise DeclarationError(
                    f"{owner}: {field} names no cell: {key!r}; {_did_you_mean(str(key), names)}"
                )


# --- The declaration against the reference's and the oracle's results ------------------
_CHECKED: dict[int, Any] = {}  # id -> the spec itself (so that its id stays its own)


def check_declaration(spec: Any) -> None:
    """Draw inputs once as the declaration says, and hold the reference's
    results (their abstract ones, jax.eval_shape) and the oracle's to
    `outputs=`: as many, each of the declared shape. Once per declaration:
    a DeclarationError naming which of them is wrong, before any cell
    blames the op. A reference or oracle that raises here is left to the
    cells, which report it."""
    if _CHECKED.get(id(spec)) is spec:
        return
    import jax
    import numpy as np

    from .oracles import _float, make_args

    try:
        args = make_args(spec, np.random.default_rng(0))
    except Exception:
        return
    declared = [shape_of(o, spec.sizes) for o in spec.outputs]
    try:
        abstract = jax.eval_shape(spec.reference, *args)
    except Exception:
        abstract = None
    if abstract is not None:
        _held(spec, "reference", [tuple(o.shape) for o in jax.tree.leaves(abstract)], declared)
    if spec.oracle is not None:
        as64 = [np.asarray(a, np.float64) if _float(a.dtype) else np.asarray(a) for a in args]
        try:
            results = spec.oracle(*as64)
        except Exception:
            results = None
        if results is not None:
            results = tuple(results) if isinstance(results, (tuple, list)) else (results,)
            _held(spec, "oracle", [tuple(np.shape(r)) for r in results], declared)
    _CHECKED[id(spec)] = spec


def _held(spec: Any, who: str, got: list[tuple[int, ...]], declared: list[Any]) -> None:
    owner = f"OpSpec {spec.name!r}"
    if len(got) != len(declared):
        raise DeclarationError(
            f"{owner}: the {who} returned {len(got)} output(s) of shapes {got}; outputs= "
            f"declares {len(declared)}: {spec.outputs} = {declared}"
        )
    for k, (shape, want) in enumerate(zip(got, declared, strict=True)):
        if shape != want:
            raise DeclarationError(
                f"{owner}: the {who} returned shape {shape} for output {k}; outputs= "
                f"declares {spec.outputs[k]} = {want}"
            )
