"""An op's signature in one line, OpSpec(signature=...), beside the long form
(args=, outputs=):

    signature="x[b,n], w[n] -> [b,n]"

is args=(Arg("x", ("b", "n")), Arg("w", ("n",))), outputs=(("b", "n"),).

The grammar (spaces anywhere between the parts):

    signature := arg ("," arg)* "->" output ("," output)*
    arg       := name "[" axes "]" [":" dtype [range]]
    range     := "[" bound "," bound (")" | "]")   (half-open or closed)
    bound     := ["-"] int | axis [("+" | "-") int]
    output    := [name] "[" axes "]"
    axes      := nothing (a scalar) | axis ("," axis)*
    axis      := name | "..."  ("..." only first: any leading axes)

An argument's `:dtype` fixes its dtype (Arg.dtype); a dtype that is not
floating (idx[b]:int32[0,n), mask[b,s]:bool) also makes it not
differentiable. An integer argument's range follows its dtype: the values
it takes, [low,high) or [low,high], each bound an int or an axis's size in
the cell, plus or minus an int (Arg.range, stored half-open: [0,n] is
range=(0, "n+1")).
An output's name is for the reader only. The Arg options the line has no
syntax for go in OpSpec(arg_options={"x": dict(domain=(0.0, math.inf))}),
by argument name: differentiable, dtype, sample, domain, smallest.

"..." (x[...,n] -> [...,n]): any leading axes, for an op that accepts any
rank (an elementwise or row-wise one); the cells draw them at the sizes
sizes["..."] (default validation.DEFAULT_LEADING, one axis of 3), and no
cell splits, resizes or vmaps over them by name. expand_leading(spec) is the
declaration a cell runs with: each leading axis named "...0", "...1" and
sized, so that every cell's shapes, in_axes and shardings follow from names.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .validation import LEADING, DeclarationError, _floating, leading_sizes

# A name, "...", "->", an integer, or one of [ ] ( ) , : + -
_TOKEN = re.compile(
    r"(?P<name>[A-Za-z_]\w*)|(?P<leading>\.\.\.)|(?P<arrow>->)|(?P<int>\d+)"
    r"|(?P<punct>[\[\](),:+-])"
)
ARG_OPTIONS = ("differentiable", "dtype", "sample", "domain", "smallest", "range", "sorted")


@dataclass(frozen=True)
class Signature:
    """A parsed signature: each argument's (name, axes, dtype or None), each
    output's (name or None, axes)."""

    args: tuple[tuple[str, tuple[str, ...], str | None], ...]
    outputs: tuple[tuple[str | None, tuple[str, ...]], ...]
    ranges: Mapping[str, tuple[int | str, int | str]]  # by argument name, half-open


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # kind, text, column (from 1)
        position = 0
        while position < len(text):
            if text[position].isspace():
                position += 1
                continue
            found = _TOKEN.match(text, position)
            if found is None:
                self.fail(f"unexpected {text[position]!r}", position + 1)
            kind = found.lastgroup or ""
            self.tokens.append((kind, found.group(), position + 1))
            position = found.end()
        self.tokens.append(("end", "", len(text) + 1))
        self.i = 0

    def fail(self, what: str, column: int, found: str = "") -> None:
        found = f", found {found}" if found else ""
        raise DeclarationError(f"signature {self.text!r}: {what} at column {column}{found}")

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self, *texts: str, kind: str = "", what: str = "") -> tuple[str, str, int]:
        token = self.peek()
        if (kind and token[0] == kind) or (texts and token[1] in texts and token[0] != "name"):
            self.i += 1
            return token
        found = "the end" if token[0] == "end" else repr(token[1])
        expected = what or " or ".join(repr(t) for t in texts)
        self.fail(f"expected {expected}", token[2], found)
        raise AssertionError  # fail raised

    def axes(self) -> tuple[str, ...]:
        self.take("[")
        axes: list[str] = []
        if self.peek()[1] == "]":
            self.take("]")
            return ()
        while True:
            token = self.peek()
            if token[0] == "leading":
                if axes:
                    self.fail("'...' may only be the first axis", token[2])
                self.i += 1
                axes.append(LEADING)
            else:
                axes.append(self.take(kind="name", what="an axis name or '...'")[1])
            if self.peek()[1] == ",":
                self.i += 1
                continue
            self.take("]")
            return tuple(axes)

    def bound(self) -> tuple[int | str, int]:
        """One range bound, as an int or "axis", "axis+k", "axis-k"; and its column."""
        column = self.peek()[2]
        if self.peek()[1] == "-" and self.peek()[0] == "punct":
            self.i += 1
            return -int(self.take(kind="int", what="an integer")[1]), column
        if self.peek()[0] == "int":
            return int(self.take(kind="int")[1]), column
        name = self.take(kind="name", what="a bound: an integer or an axis name")[1]
        if self.peek()[1] in ("+", "-") and self.peek()[0] == "punct":
            sign = self.take("+", "-")[1]
            return f"{name}{sign}{self.take(kind='int', what='an integer')[1]}", column
        return name, column

    def value_range(self) -> tuple[int | str, int | str]:
        """[low,high) or [low,high]: stored half-open."""
        self.take("[")
        low, _ = self.bound()
        self.take(",")
        high, column = self.bound()
        closed = self.take(")", "]", what="')' (half-open) or ']' (closed)")[1] == "]"
        if closed:
            if isinstance(high, int):
                high += 1
            else:
                name, sign, k = re.match(r"(\w+)([+-]?)(\d*)", high).groups()  # type: ignore[union-attr]
                shift = (int(k) if sign == "+" else -int(k) if sign else 0) + 1
                high = name if shift == 0 else f"{name}{'+' if shift > 0 else '-'}{abs(shift)}"
        if isinstance(low, int) and isinstance(high, int) and low >= high:
            self.fail(f"the range [{low},{high}) is empty", column)
        return low, high

    def parse(self) -> Signature:
        args: list[tuple[str, tuple[str, ...], str | None]] = []
        self.ranges: dict[str, tuple[int | str, int | str]] = {}
        while True:
            _, name, column = self.take(kind="name", what="an argument name")
            if any(a[0] == name for a in args):
                self.fail(f"argument {name!r} named twice", column)
            axes = self.axes()
            dtype = None
            if self.peek()[1] == ":":
                self.i += 1
                dtype = self.take(kind="name", what="a dtype name (int32, bool, ...)")[1]
                if self.peek()[1] == "[":
                    self.ranges[name] = self.value_range()
            args.append((name, axes, dtype))
            if self.peek()[1] != ",":
                break
            self.i += 1
        self.take("->", what="',' or '->'")
        outputs: list[tuple[str | None, tuple[str, ...]]] = []
        while True:
            name = self.take(kind="name")[1] if self.peek()[0] == "name" else None
            if self.peek()[1] != "[":
                self.take("[", what="'[' (an output's axes: [b,n], or [] for a scalar)")
            outputs.append((name, self.axes()))
            if self.peek()[1] != ",":
                break
            self.i += 1
        self.take(kind="end", what="',' or the end")
        return Signature(tuple(args), tuple(outputs), self.ranges)


def parse_signature(signature: str) -> Signature:
    """The parsed signature; a mistake raises DeclarationError, with its column."""
    if not isinstance(signature, str):
        raise DeclarationError(
            f"signature must be a string such as 'x[b,n], w[n] -> [b,n]', not {signature!r}"
        )
    return _Parser(signature).parse()


def args_and_outputs(
    owner: str, signature: str, arg_options: Mapping[str, Mapping[str, Any]] | None
) -> tuple[tuple[Any, ...], tuple[tuple[str, ...], ...]]:
    """OpSpec's args and outputs from its signature and arg_options."""
    from .declaration import Arg

    parsed = parse_signature(signature)
    options = dict(arg_options or {})
    names = [a[0] for a in parsed.args]
    for name, given in options.items():
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the arguments are {names}"
            raise DeclarationError(f"{owner}: arg_options names no argument: {name!r}; {hint}")
        if not isinstance(given, Mapping):
            raise DeclarationError(
                f"{owner}: arg_options[{name!r}] must be a dict of Arg options, e.g. "
                f"dict(domain=(0.0, math.inf)), not {given!r}"
            )
        for key in given:
            if key not in ARG_OPTIONS:
                close = difflib.get_close_matches(str(key), ARG_OPTIONS, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"they are {ARG_OPTIONS}"
                raise DeclarationError(
                    f"{owner}: arg_options[{name!r}] has {key!r}, not an Arg option; {hint}"
                )
    args = []
    for name, axes, dtype in parsed.args:
        given = dict(options.get(name, {}))
        if dtype is not None:
            if "dtype" in given:
                raise DeclarationError(
                    f"{owner}: argument {name!r} has a dtype in signature= ({dtype}) and in "
                    "arg_options; give it once"
                )
            given["dtype"] = dtype
            if name in parsed.ranges:
                if "range" in given:
                    raise DeclarationError(
                        f"{owner}: argument {name!r} has a range in signature= and in "
                        "arg_options; give it once"
                    )
                given["range"] = parsed.ranges[name]
            if "differentiable" not in given and not _floating(dtype):
                given["differentiable"] = False
        args.append(Arg(name, axes, **given))
    return tuple(args), tuple(axes for _, axes in parsed.outputs)


# --- Leading axes in the cells ---------------------------------------------------------
def uses_leading(spec: Any) -> bool:
    return any(a.axes[:1] == (LEADING,) for a in spec.args)


def expand_leading(spec: Any) -> Any:
    """The declaration a cell runs with: where an argument or output has
    "...", the leading axes named "...0", "...1" (names no declaration may
    use, which OpSpec.axes leaves out: no size-*, jit-* or shard_map cell
    names them) and sized from sizes["..."]. The declaration itself where
    none has. A copy that is not validated again (its names are the cells')."""
    if not uses_leading(spec):
        return spec
    lead = leading_sizes(spec.sizes)
    names = tuple(f"{LEADING}{i}" for i in range(len(lead)))

    def expanded(axes: tuple[str, ...]) -> tuple[str, ...]:
        return names + axes[1:] if axes[:1] == (LEADING,) else axes

    args = []
    for arg in spec.args:
        new = copy.copy(arg)
        object.__setattr__(new, "axes", expanded(arg.axes))
        args.append(new)
    sizes = {k: v for k, v in spec.sizes.items() if k != LEADING}
    sizes.update(zip(names, lead, strict=True))
    out = copy.copy(spec)
    object.__setattr__(out, "args", tuple(args))
    object.__setattr__(out, "outputs", tuple(expanded(o) for o in spec.outputs))
    object.__setattr__(out, "sizes", sizes)
    return out
