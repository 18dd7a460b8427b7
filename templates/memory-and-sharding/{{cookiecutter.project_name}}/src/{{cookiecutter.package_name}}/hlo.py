"""Read collectives out of a compiled program: the evidence that a sharding
rule works. The text is XLA's optimized HLO (`jit(f).lower(...).compile()`)."""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
# "%name = f32[8,16]{1,0} all-gather(" or "%name = (f32[8], s32[8]) all-reduce("
_LINE = re.compile(
    r"=\s*(?P<shape>\(.*?\)|\S+)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(-start)?\("
)
_ARRAY = re.compile(r"(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")


@dataclass(frozen=True)
class Collective:
    op: str
    bytes: int  # size of its result on one device
    shape: str


def collectives(compiled_text: str) -> list[Collective]:
    found: list[Collective] = []
    for line in compiled_text.splitlines():
        match = _LINE.search(line)
        if match:
            shape = match.group("shape")
            found.append(Collective(match.group("op"), _bytes(shape), shape))
    return found


def collective_bytes(compiled_text: str) -> int:
    return sum(c.bytes for c in collectives(compiled_text))


def _bytes(shape: str) -> int:
    total = 0
    for array in _ARRAY.finditer(shape):
        dims = [int(d) for d in array.group("dims").split(",") if d]
        bits = re.sub(r"\D", "", array.group("dtype"))  # f32 -> 32, bf16 -> 16, pred -> ""
        itemsize = int(bits) // 8 if bits else 1
        total += itemsize * int(np.prod(dims, dtype=np.int64))
    return total


def compiled_text(fn: Callable[..., Any], *args: Any) -> str:
    text = jax.jit(fn).lower(*args).compile().as_text()
    if text is None:  # JAX allows a backend not to show its compiled program
        raise RuntimeError(f"{jax.default_backend()} does not give the compiled program's text")
    return text
