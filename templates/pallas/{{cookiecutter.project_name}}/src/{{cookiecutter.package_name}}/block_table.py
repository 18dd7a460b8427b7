"""Tuned block sizes, by device kind, dtype and shape bucket.

The tuning command measures block sizes on the present device and writes a
table (see tune.py). {{ cookiecutter.op_name }} reads tables when it is traced (so set them
up before the first jit call), for the block sizes the caller did not give,
under the kind of device the kernel will run on, which is not always this
host's: the native kernel's entries are those of the kernel's platform's
device (target_device_kind(backend.PLATFORM)). Traced on a host without that device,
to export for it, the program gets the entries of the device described with
jax.sharding.use_abstract_mesh (an AbstractMesh whose abstract_device names
the device kind and platform), and without one kernel.DEFAULT_BLOCKS, valid
on every device of the platform. The interpreted kernel's entries are this
host's (the device kind the tuner wrote when it ran here).

Where the tables are, first match wins:

1. the table at the path in the environment variable BLOCK_TABLE_ENV, if set
   (your tuning runs);
2. block_table.json beside this module (shipped with the package: copy the
   entries you measured into it to make them everyone's default);
3. kernel.default_blocks, for shapes and devices neither table knows: on a
   TPU the largest blocks that fit its VMEM, else kernel.DEFAULT_BLOCKS,
   valid on every device.

The format, one JSON object:

    {"<device kind>": {"<dtype>": {"<bucket>": ENTRY}}}

ENTRY is [block_m, block_n, block_k], or what the tuner writes: the blocks
with how they were measured beside them (free-form, for the reader),

    {"blocks": [block_m, block_n, block_k],
     "measured": {"date": ..., "jax": ..., "shape": ..., "forward_ms": ...}}

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
from typing import Any, NamedTuple, TypeAlias

import jax
import numpy as np
from jax import export

BLOCK_TABLE_ENV = "{{ cookiecutter.package_name.upper() }}_BLOCK_TABLE"
PACKAGED = "block_table.json"
KEYS = ("block_m", "block_n", "block_k")

Entry: TypeAlias = list[int] | dict[str, Any]
Table: TypeAlias = dict[str, dict[str, dict[str, Entry]]]


class Tuned(NamedTuple):
    blocks: dict[str, int]
    source: str  # the table's path, for error messages


def bucket(m: int, k: int, n: int) -> str:
    """Shapes that share a bucket share their tuned blocks."""
    return "x".join(str(1 << max(size - 1, 0).bit_length()) for size in (m, k, n))


def device_kind() -> str:
    """This host's device kind."""
    kind: str = jax.devices()[0].device_kind
    return kind


def target_device_kind(platform: str) -> str | None:
    """The kind of device a program lowered for platform ("tpu", "cuda", as
    jax.export names platforms) runs on: this host's, if it is of that
    platform; else the device the caller describes with
    jax.sharding.use_abstract_mesh (exporting for a TPU from a CPU host, say);
    else None: unknown, so no tuned entry applies."""
    if export.default_export_platform() == platform:
        return device_kind()
    described = jax.sharding.get_abstract_mesh().abstract_device
    # AbstractDevice takes JAX's device.platform name: "gpu" for "cuda".
    if described is not None and _CANONICAL.get(described.platform, described.platform) == platform:
        return str(described.device_kind)
    return None


_CANONICAL = {"gpu": "cuda"}


def lookup(kind: str | None, dtype: np.dtype, m: object, k: object, n: object) -> Tuned | None:
    """The tuned blocks for this device kind, dtype and shape, or None.
    Symbolic shapes (jax.export) have no bucket, nor an unknown device a
    kind: they get the defaults."""
    if kind is None or not all(isinstance(size, int) for size in (m, k, n)):
        return None
    key = bucket(m, k, n)  # type: ignore[arg-type]  # ints, checked above
    dtype_name = np.dtype(dtype).name
    for path in table_paths():
        entry = read(path).get(kind, {}).get(dtype_name, {}).get(key)
        if entry is not None:
            return Tuned(dict(zip(KEYS, blocks_of(entry), strict=True)), str(path))
    return None


def blocks_of(entry: Entry) -> list[int]:
    """An entry's blocks, in either form."""
    return entry["blocks"] if isinstance(entry, dict) else entry


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
            for key, entry in buckets.items():
                blocks = entry.get("blocks") if isinstance(entry, dict) else entry
                valid = (
                    isinstance(blocks, list)
                    and len(blocks) == len(KEYS)
                    and all(type(size) is int and size > 0 for size in blocks)
                )
                if not valid:
                    return (
                        f"{kind!r} / {dtype_name!r} / {key!r}: expected "
                        f"[block_m, block_n, block_k] as positive ints, got {entry!r}"
                    )
    return ""


def write(
    path: Path,
    kind: str,
    dtype_name: str,
    key: str,
    blocks: tuple[int, ...],
    measured: dict[str, Any] | None = None,
) -> None:
    """Add or replace one entry, keeping the rest of the table; with how it was
    measured beside the blocks, if given."""
    table = read(path) if path.exists() else {}
    entry: Entry = (
        list(blocks) if measured is None else {"blocks": list(blocks), "measured": measured}
    )
    table.setdefault(kind, {}).setdefault(dtype_name, {})[key] = entry
    path.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
