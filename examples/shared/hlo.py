"""Collectives in a compiled program, read from its HLO text: the evidence that a sharding rule
or a halo exchange is the communication that runs (the examples' tests) and what each version
moves (their bench.py).

The text is XLA's optimized, partitioned HLO: `compiled_text(f, *args)`, i.e.
`jax.jit(f).lower(*args).compile().as_text()`. Bytes are those of a collective's result on one
device (for an all-gather: the gathered array), the usual measure of what it moves into each
device. `in_loop` says whether the instruction sits in a while loop's body (JAX names it
".../while/body/..." in the metadata), i.e. runs once per iteration, such as a time step.
"""

import re
from dataclasses import dataclass

import jax

__all__ = ["COLLECTIVES", "Collective", "collectives", "compiled_text", "total_bytes"]

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
# "%all-gather = f32[16,1024]{0,1} all-gather(" or "... = (f32[8], f32[8]) all-reduce-start(",
# "%x = f32[256,1]{1,0} collective-permute(%y), ..., source_target_pairs={{0,1},{1,2}}, ..."
_INSTRUCTION = re.compile(
    r"=\s*(?P<shape>\(.*?\)|\S+)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\("
)
_ARRAY = re.compile(r"(?P<dtype>[a-z]+)(?P<bits>\d*)\[(?P<dims>[\d,]*)\]")
_PAIRS = re.compile(r"source_target_pairs=\{(?P<pairs>[\d,{}]*)\}")


@dataclass(frozen=True)
class Collective:
    op: str
    shape: str  # the result's shape without layout, e.g. "f32[256,1]"
    bytes: int
    pairs: frozenset  # collective-permute: {(source, target)} over partition ids
    in_loop: bool


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
        if not match:
            continue
        shape = re.sub(r"\{[\d,]*\}", "", match.group("shape"))  # drop layouts
        pairs = _PAIRS.search(line)
        pairs = frozenset(
            tuple(map(int, pair.split(",")))
            for pair in re.findall(r"\{(\d+,\d+)\}", pairs.group("pairs") if pairs else "")
        )
        found.append(
            Collective(match.group("op"), shape, _bytes(shape), pairs, "/while/body/" in line)
        )
    return found


def total_bytes(text):
    return sum(c.bytes for c in collectives(text))


def compiled_text(fn, *args):
    return jax.jit(fn).lower(*args).compile().as_text()
