"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

TODO: declare your op: its arguments and their named axes, the sizes the
cells use, which axes shard with no communication, the tolerances it needs,
and for each cell it does not support, the error it raises and what to use
instead. OpSpec(oracle=None): the reference run in float64 is the oracle.
"""

from functools import partial

from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_partitioned,
    {{ cookiecutter.op_name }}_reference,
)

import target
from compare import Ulps
from conformance import Arg, OpSpec, Refuse

# TODO: the errors your op may make, in ulps of the dtype. The identity is
# exact: 0 would do; 1 leaves room for a cast.
VALUES = Ulps(at_value=1, at_scale=1)
GRADIENTS = Ulps(at_value=1, at_scale=1)

# Inside a shard_map manual over "x", operands split over its free Explicit
# axis "y": the kernel's blocks keep x's varying types, which Pallas's
# interpreter and the custom VJP lose (src/.../composition.py, per_shard).
PARTLY_MANUAL_EXPLICIT = Refuse(
    NotImplementedError,
    r"inside a jax\.shard_map manual over",
    "refused: operands split over the Explicit axes a shard_map leaves free;"
    " make it manual over them too, or reshard them whole first",
)
# pallas_call has no autodiff rule: the op is a jax.custom_vjp, reverse mode only.
FORWARD_MODE = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: a custom_vjp is reverse mode only; jax.jvp the reference",
)
# The kernel takes float32 and bfloat16; finite differences need float64.
FLOAT64 = Refuse(
    TypeError,
    r"must be float32 or bfloat16",
    "refused: no float64 kernel; the gradient cells check against the float64 oracle",
)

# TODO: the sizes benchmarks/bench.py times on the kernel's hardware and
# interpreted on a CPU; bench_flops(sizes), if your op computes, for the roofline.
BENCH_SIZES = [{"m": 4096, "n": 4096}, {"m": 16384, "n": 8192}]
BENCH_SIZES_INTERPRETED = [{"m": 256, "n": 256}]

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    # "kernel": on this CPU host, the Pallas kernel interpreted.
    op=partial({{ cookiecutter.op_name }}, implementation="kernel"),
    auto_op=partial({{ cookiecutter.op_name }}_partitioned, implementation="kernel"),
    reference={{ cookiecutter.op_name }}_reference,
    oracle=None,  # the reference, run in float64
    args=(Arg("x", ("m", "n")),),
    outputs=(("m", "n"),),
    # Ragged: m is no multiple of any backend's DEFAULT_BLOCK_M (8, 16, 64), nor
    # is a quarter or a half of it (each device's rows on the cells' 4- and
    # 2-device meshes), so every grid's last row block hangs over the edge,
    # where a grid of m // block_m blocks leaves rows unwritten. Multiples of
    # 4: the sharded cells split each axis over 4 devices. n: a power of two,
    # as Triton's blocks span n whole.
    sizes={"m": 68, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    shard_map_axes=("m", "n"),
    symbolic_axis="m",
    # Where the cells lower the op from this host: tests/target.py.
    platforms=target.PLATFORMS,
    refuse={
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        "check-grads-*": FLOAT64,
        "shard-map-partial-explicit-*": PARTLY_MANUAL_EXPLICIT,
        # The kernel runs no grid over an empty axis, and says so (op.py).
        "size-*-0": Refuse(
            ValueError,
            r"empty operand",
            "refused: no grid of blocks over an empty axis; skip the call",
        ),
        # What the backend refuses whatever the op (its interpreter's limits on
        # this host, say): tests/target.py.
        **target.BACKEND_REFUSALS,
        # The rows the backend's blocks cannot hold whole (the kernel checks
        # its blocks and says so): tests/target.py.
        **target.WHOLE_ROW_REFUSALS,
    },
)
