"""Collectives in a compiled program, and how many bytes each produces: the evidence that the
sharding rule is used (tests) and what it saves (bench.py).

The text is XLA's optimized, partitioned HLO: `jax.jit(f).lower(*args).compile().as_text()`.
Bytes are those of a collective's result on one device (for an all-gather: the gathered
array), the usual measure of what it moves into each device.
"""

import re
from dataclasses import dataclass

import jax

__all__ = ["COLLECTIVES", "Collective", "collectives", "compiled_text", "total_bytes"]

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
# "%all-gather = f32[16,1024]{0,1} all-gather(" or "... = (f32[8], f32[8]) all-reduce-start("
_INSTRUCTION = re.compile(
    r"=\s*(?P<shape>\(.*?\)|\S+)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\("
)
_ARRAY = re.compile(r"(?P<dtype>[a-z]+)(?P<bits>\d*)\[(?P<dims>[\d,]*)\]")


@dataclass(frozen=True)
class Collective:
    op: str
    shape: str
    bytes: int


def _bytes(shape):
    total = 0
    for array in _ARRAY.finditer(shape):
        bits = int(array.group("bits") or 8)  # pred[...] has no width: one byte
        count = 1
        for dim in filter(None, array.group("dims").split(",")):
            count *= int(dim)
        total += count * bits // 8
    return total


def collectives(text):
    """Every collective instruction in compiled HLO text, in program order."""
    found = []
    for line in text.splitlines():
        match = _INSTRUCTION.search(line)
        if match:
            shape = match.group("shape")
            found.append(Collective(match.group("op"), shape, _bytes(shape)))
    return found


def total_bytes(text):
    return sum(c.bytes for c in collectives(text))


def compiled_text(fn, *args):
    return jax.jit(fn).lower(*args).compile().as_text()
