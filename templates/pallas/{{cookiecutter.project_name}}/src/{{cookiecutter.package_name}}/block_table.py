"""Tuned block sizes, by device kind, dtype and shape bucket.

The tuning command measures block sizes on the present device and writes a
table (see tune.py). fused_matmul reads tables when it is traced (so set them
up before the first jit call), for the block sizes the caller did not give:

1. the table at the path in the environment variable BLOCK_TABLE_ENV, if set
   (your tuning runs);
2. block_table.json beside this module (shipped with the package: copy the
   entries you measured into it to make them everyone's default);
3. kernel.DEFAULT_BLOCKS, valid on every device, for shapes and devices
   neither table knows.

The format, one JSON object:

    {"<device kind>": {"<dtype>": {"<bucket>": [block_m, block_n, block_k]}}}

device kind as jax.devices()[0].device_kind says it ("TPU v5 lite", "NVIDIA
H100 80GB HBM3"), dtype as NumPy names it ("bfloat16"), bucket "MxKxN" with
each of m, k and n rounded up to a power of two. A table that is not of this
form is refused with an error naming the file; an entry whose blocks the
kernel cannot use fails the call that picks it, naming the file too: a table
is configuration someone wrote, and a typo in it should not pass unnoticed.
"""

import json
import os
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

BLOCK_TABLE_ENV = "{{ cookiecutter.package_name.upper() }}_BLOCK_TABLE"
PACKAGED = "block_table.json"
KEYS = ("block_m", "block_n", "block_k")

type Table = dict[str, dict[str, dict[str, list[int]]]]


class Tuned(NamedTuple):
    blocks: dict[str, int]
    source: str  # the table's path, for error messages


def bucket(m: int, k: int, n: int) -> str:
    """Shapes that share a bucket share their tuned blocks."""
    return "x".join(str(1 << max(size - 1, 0).bit_length()) for size in (m, k, n))


def device_kind() -> str:
    kind: str = jax.devices()[0].device_kind
    return kind


def lookup(dtype: np.dtype, m: object, k: object, n: object) -> Tuned | None:
    """The tuned blocks for this device, dtype and shape, or None. Symbolic
    shapes (jax.export) have no bucket: they get the defaults."""
    if not all(isinstance(size, int) for size in (m, k, n)):
        return None
    key = bucket(m, k, n)  # type: ignore[arg-type]  # ints, checked above
    kind, dtype_name = device_kind(), np.dtype(dtype).name
    for path in table_paths():
        entry = read(path).get(kind, {}).get(dtype_name, {}).get(key)
        if entry is not None:
            return Tuned(dict(zip(KEYS, entry, strict=True)), str(path))
    return None


def table_paths() -> list[Path]:
    """The tables to search, first match wins."""
    packaged = Path(str(resources.files(__package__ or __name__).joinpath(PACKAGED)))
    user = os.environ.get(BLOCK_TABLE_ENV, "")
    return [Path(user), packaged] if user else [packaged]


def read(path: Path) -> Table:
    """Load a table and check its form; a missing user table is an error."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the block table {path}: {error}") from None
    problem = _problem(table)
    if problem:
        raise ValueError(f"block table {path} is malformed: {problem}")
    checked: Table = table
    return checked


def _problem(table: object) -> str:
    """What is wrong with a table's form, or "" when nothing is."""
    if not isinstance(table, dict):
        return "the top level must be an object keyed by device kind"
    for kind, dtypes in table.items():
        if not isinstance(dtypes, dict):
            return f"{kind!r} must map dtype names to buckets"
        for dtype_name, buckets in dtypes.items():
            if not isinstance(buckets, dict):
                return f"{kind!r} / {dtype_name!r} must map buckets to blocks"
            for key, blocks in buckets.items():
                valid = (
                    isinstance(blocks, list)
                    and len(blocks) == len(KEYS)
                    and all(type(size) is int and size > 0 for size in blocks)
                )
                if not valid:
                    return (
                        f"{kind!r} / {dtype_name!r} / {key!r}: expected "
                        f"[block_m, block_n, block_k] as positive ints, got {blocks!r}"
                    )
    return ""


def write(path: Path, kind: str, dtype_name: str, key: str, blocks: tuple[int, ...]) -> None:
    """Add or replace one entry, keeping the rest of the table."""
    table = read(path) if path.exists() else {}
    table.setdefault(kind, {}).setdefault(dtype_name, {})[key] = list(blocks)
    path.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
