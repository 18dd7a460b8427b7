"""The declaration of the op's signature, from which tests/conformance/
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes shard with no communication, and for each cell the op does
not support, the error it raises and what to use instead.
"""

from functools import partial

from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_partitioned,
    {{ cookiecutter.op_name }}_reference,
)

import target
{% if cookiecutter.backward == "reference" -%}
from compare import Ulps
{% endif -%}
from conformance import Arg, Collectives, OpSpec, Refuse
from oracle import GRADIENTS, VALUES, {{ cookiecutter.op_name }}_f64

# The kernel needs the contracted axis whole on each device (the GELU after
# the sum cannot run on partial sums).
SHARDED_K = Refuse(
    ValueError,
    r"the contracted axis k is sharded",
    "refused: the kernel needs k whole; jax.sharding.reshard it first",
)
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
# An empty axis: no block to run the grid over.
EMPTY = Refuse(
    ValueError,
    r"empty operands",
    "refused: no grid of blocks over an empty axis; skip the call (the result is empty or zeros)",
)
# The kernel takes float32 and bfloat16; finite differences need float64.
FLOAT64 = Refuse(
    TypeError,
    r"must share one dtype, float32 or bfloat16",
    "refused: no float64 kernel; the gradient cells check against the float64 oracle",
)

# What benchmarks/bench.py times: on the kernel's hardware, and interpreted on a
# CPU (small: the interpreter is slow); and the FLOPs of one call, for the
# roofline.
BENCH_SIZES = [
    {"m": 1024, "k": 1024, "n": 1024},
    {"m": 4096, "k": 4096, "n": 4096},
    {"m": 8192, "k": 8192, "n": 8192},
    {"m": 8192, "k": 1024, "n": 8192},
]
BENCH_SIZES_INTERPRETED = [
    {"m": 128, "k": 128, "n": 128},
    {"m": 256, "k": 256, "n": 256},
    {"m": 512, "k": 512, "n": 512},
]


def bench_flops(sizes: dict[str, int]) -> int:
    return 2 * sizes["m"] * sizes["k"] * sizes["n"]


FINITE_PRODUCTS = (-1e18, 1e18)

SPEC = OpSpec(
    name="{{ cookiecutter.op_name }}",
    # "kernel": on this CPU host, the Pallas kernel interpreted ("auto" would
    # run the reference off the kernel's platform and test nothing).
    op=partial({{ cookiecutter.op_name }}, implementation="kernel"),
    # Under jit with Auto shardings XLA cannot see into the kernel: the
    # custom_partitioning rule keeps it local to each shard.
    auto_op=partial({{ cookiecutter.op_name }}_partitioned, implementation="kernel"),
    reference={{ cookiecutter.op_name }}_reference,
    oracle={{ cookiecutter.op_name }}_f64,
    # A sum of k products must stay finite in float32: |a|, |b| and |bias|
    # below about 1e19 / sqrt(k). The hard-input cells stay within 1e18.
    args=(
        Arg("a", ("m", "k"), domain=FINITE_PRODUCTS),
        Arg("b", ("k", "n"), domain=FINITE_PRODUCTS),
        Arg("bias", ("n",), domain=FINITE_PRODUCTS),
    ),
    outputs=(("m", "n"),),
    # Small, as the kernel is interpreted here: below the triton and mosaic_gpu
    # blocks (partial blocks there); the tpu kernel clamps its blocks to the
    # array, and its own tests (test_kernel.py) take ragged shapes.
    sizes={"m": 16, "k": 16, "n": 16},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
{%- if cookiecutter.backward == "reference" %}
    # The backward is the reference's VJP, so second order (grad-grad-*) is
    # the reference's own: JAX's float32 autodiff of the VJP of tanh GELU, off
    # the float64 one by up to 2168 ulps of the largest entry (measured over 6
    # seeds of the grad-grad-explicit cells; the kernel backward, whose
    # _gelu_slope avoids 1 - tanh(u)^2, stays within 16); 2**13.
    second_order_tolerance=Ulps(at_value=0, at_scale=2**13),
{%- endif %}
    shard_map_axes=("m", "n"),
    symbolic_axis="m",
    # Where the cells lower the op from this host: tests/target.py.
    platforms=target.PLATFORMS,
{%- if cookiecutter.backend == "tpu" %}
    # The kernel's dots ask for float32's own bits (kernel.MATMUL_PRECISION:
    # HIGHEST, Mosaic's multi-pass float32 matmul; its default is one
    # bfloat16 pass); test_kernel.py checks the kernels' Mosaic modules.
    matmul_inputs={"tpu": "float32"},
{%- elif cookiecutter.backend == "mosaic_gpu" %}
    # WGMMA multiplies float32 as TensorFloat-32, whatever the precision asked.
    matmul_inputs={"gpu": "tensorfloat32"},
{%- endif %}
    # k sharded: the rule gathers it, where the reference sums partial products.
    # The forward gathers x and w along k (the reference all-reduces its
    # partial sums); the gradient communicates as the reference's does.
    extra_collectives={
        "jit-auto-k": Collectives(
            "k is gathered: the GELU needs whole sums",
            forward={"all-gather": 2},
            gradient={"all-reduce": 1},
        ),
        # k split over the automatic axis a shard_map leaves free: gathered
        # too; the gradient's sums as the reference's.
        "shard-map-partial-*-free-k": Collectives(
            "k is gathered: the GELU needs whole sums",
            forward={"all-gather": 2},
            gradient={"all-reduce": 2},
        ),
    },
    refuse={
        "jit-explicit-k": SHARDED_K,
        "jit-explicit-set-mesh-k": SHARDED_K,
        "grad-grad-explicit-k": SHARDED_K,
        "grad-grad-explicit-vmap-k": SHARDED_K,
        "shard-map-partial-explicit-*": PARTLY_MANUAL_EXPLICIT,
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        "check-grads-*": FLOAT64,
        "size-*-0": EMPTY,
        # What the backend refuses whatever the op (its interpreter's limits on
        # this host, say): tests/target.py.
        **target.BACKEND_REFUSALS,
    },
)
