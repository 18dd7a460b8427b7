"""The backend, GPUs through Triton (deprecated: Pallas's Triton lowering is
deprecated since JAX 0.11 in favour of Mosaic GPU): what every kernel for it
needs around pallas_call, whatever it computes. kernel.py and the op module
import it: the platform, and the interpreter a kernel runs in off a GPU.
"""

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax
from jax.export import default_export_platform

from .composition import per_lowering_platform

BACKEND = "triton"
# The platform the kernel runs natively on, as jax.export names platforms
# (JAX's device.platform says "gpu").
PLATFORM = "cuda"

# None: native on a GPU, interpreted elsewhere; or True/False.
Interpret: TypeAlias = bool | None
# A kernel's reference to an array in global memory. Pallas declares its
# functions with JAX-internal ref types (jax._src.state), which code outside
# JAX cannot name, so this is Any.
Ref: TypeAlias = Any


def interpreted(interpret: Interpret) -> bool:
    """Whether a call with this interpret argument runs in Pallas's
    interpreter: as asked, and for None where this host lacks a GPU
    (native_or_interpreted chooses per lowering platform, but only the
    host's programs run here)."""
    return default_export_platform() != PLATFORM if interpret is None else bool(interpret)


def refuse_varying(axes: frozenset[str]) -> None:
    """Pallas's generic interpreter (JAX 0.12's pallas_call_hlo_interpret, the
    only one for this backend) cannot run a kernel whose operands vary over
    mesh axes (inside jax.shard_map with check_vma=True): it replays the kernel
    body, traced without varying axes, on varying blocks, and JAX's check of
    varying axes fails deep inside the lowering (in a loop's scan, say:
    "mismatched varying manual axes"). Say so, with the fix, before that."""
    raise NotImplementedError(
        f"the kernel: the operands vary over the mesh axes {sorted(axes)} (jax.shard_map "
        "with check_vma=True), which Pallas's generic interpreter (JAX 0.12) cannot run: pass "
        "check_vma=False to jax.shard_map; compiled on a GPU the kernel runs as is"
    )


T = TypeVar("T")


def native_or_interpreted(
    native: Callable[..., T], interpreted: Callable[..., T], *operands: jax.Array
) -> T:
    """native(*operands) where the program is lowered for GPU, interpreted(*operands)
    for any other platform (composition.per_lowering_platform: eagerly, by the
    devices the arrays are on), so that a program exported for GPU from a CPU
    host holds the kernel itself."""
    return per_lowering_platform(PLATFORM, native, interpreted, *operands)
