"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes shard with no communication, and for each cell the op does
not support, the error it raises and what to use instead.
"""

from functools import partial

{% if cookiecutter.backend == "mosaic_gpu" -%}
from {{ cookiecutter.package_name }} import kernel

# isort: split
{% endif -%}
from {{ cookiecutter.package_name }} import (
    {{ cookiecutter.op_name }},
    {{ cookiecutter.op_name }}_partitioned,
    {{ cookiecutter.op_name }}_reference,
)

{% if cookiecutter.backward == "reference" -%}
from compare import Ulps
{% endif -%}
from conformance import Arg, Collectives, OpSpec, Refuse
{%- if cookiecutter.backend == "mosaic_gpu" %}
from devices import mesh_devices
{%- endif %}
from oracle import GRADIENTS, VALUES, {{ cookiecutter.op_name }}_f64

# The kernel needs the contracted axis whole on each device (the GELU after
# the sum cannot run on partial sums).
SHARDED_K = Refuse(
    ValueError,
    r"the contracted axis k is sharded",
    "refused: the kernel needs k whole; jax.sharding.reshard it first",
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
    r"must share one dtype, float32 or bfloat16",
    "refused: no float64 kernel; the gradient cells check against the float64 oracle",
)

{%- if cookiecutter.backend == "mosaic_gpu" %}
# Mosaic GPU's interpreter keeps one global state for all devices: the kernel
# refuses to be interpreted per shard on several devices (a GPU runs it): in
# jax.shard_map, under an Explicit mesh, and vmapped over a batch split over
# one. And custom_partitioning cannot hold the interpreter's ordered io_callbacks.
SEVERAL_DEVICES = Refuse(
    NotImplementedError,
    r"the kernel: per shard on several devices",
    "interpreted: one device only",
)
PARTITIONED = Refuse(
    NotImplementedError,
    r"{{ cookiecutter.op_name }}: custom_partitioning cannot hold",
    "interpreted: call {{ cookiecutter.op_name }}",
)
# The same io_callbacks are effects, which jax.checkpoint cannot differentiate.
CHECKPOINT_EFFECTS = Refuse(
    NotImplementedError,
    r"Effects not supported in AD of .checkpoint./.remat.",
    "interpreted: host callbacks",
)
# Those refusals are the interpreter's, so they apply where the cells run it:
# the kernel is interpreted off a GPU (kernel.device_platform). The unsharded
# cells run on the default device; the sharded ones on tests/conftest.py's
# mesh devices, simulated CPU devices where there are too few GPUs.
INTERPRETS = not kernel.runs_natively()
SHARDS_INTERPRETED = mesh_devices(4)[0].platform != "gpu"
INTERPRETED_SHARDED = {
    # Listed before "shard-map-*" (the first glob that matches wins): "y" stays
    # automatic there, so the cell runs the custom_partitioning entry point.
    "shard-map-partial-*": PARTITIONED,
    "shard-map-*": SEVERAL_DEVICES,
    "vmap-sharded-new-axis": SEVERAL_DEVICES,
    "jit-explicit-[mn]": SEVERAL_DEVICES,
    "jit-explicit-set-mesh-[mn]": SEVERAL_DEVICES,
    "jit-explicit-2d-*": SEVERAL_DEVICES,
    "grad-grad-explicit-[mn]": SEVERAL_DEVICES,
    "jit-auto-*": PARTITIONED,
}
{%- elif cookiecutter.backend == "triton" %}
# Inside jax.shard_map with check_vma=True (the default) the kernel's types are
# right (kernel.vary_alike), but Pallas's generic interpreter (JAX 0.12's
# pallas_call_hlo_interpret, the only one for this backend) replays the kernel
# body, traced without varying axes, on varying blocks: the k loop's carry
# fails scan's check of varying axes. The interpreted kernel refuses such
# operands up front; compiled on a GPU it runs. (The TPU backend runs these
# cells in Pallas's TPU interpreter instead.)
INTERPRETER_VMA = Refuse(
    NotImplementedError,
    r"the kernel: the operands vary over the mesh axes .* pass check_vma=False",
    "interpreted: check_vma=False only",
)
{%- endif %}

{%- if cookiecutter.backend != "tpu" %}

# Pallas on GPUs cannot size this kernel's grid or blocks symbolically
# (jax-ml/jax#24960): export with concrete shapes.
SYMBOLIC = Refuse(
    NotImplementedError,
    r"the kernel: symbolic sizes",
    "refused: no symbolic sizes on this backend (jax-ml/jax#24960)",
)
{%- endif %}

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
{%- if cookiecutter.backend == "tpu" %}
    # Lowered for a TPU from this host, the program holds the Mosaic kernel.
    platforms={"cpu": "", "tpu": r"tpu_custom_call"},
    # The kernel's dots ask for float32's own bits (kernel.MATMUL_PRECISION:
    # HIGHEST, Mosaic's multi-pass float32 matmul; its default is one
    # bfloat16 pass); test_kernel.py checks the kernels' Mosaic modules.
    matmul_inputs={"tpu": "float32"},
{%- elif cookiecutter.backend == "mosaic_gpu" %}
    # None for this op ("kernel"): it is interpreted here (the choice is the
    # host's, as lax.platform_dependent cannot hold the interpreter's ordered
    # callbacks on JAX 0.12), and those callbacks cannot be serialized.
    # tests/test_composed.py exports {{ cookiecutter.op_name }}'s default ("auto", chosen per
    # lowering platform) for cuda from this host and finds mosaic_gpu_v2.
    platforms={},
    # WGMMA multiplies float32 as TensorFloat-32, whatever the precision asked.
    matmul_inputs={"gpu": "tensorfloat32"},
{%- else %}
    # Triton lowers only under an abstract GPU device (tests/target.py's
    # export_context), which the generic cells do not set up.
    platforms={"cpu": ""},
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
    },
    refuse={
        "jit-explicit-k": SHARDED_K,
        "jit-explicit-set-mesh-k": SHARDED_K,
        "grad-grad-explicit-k": SHARDED_K,
        "jvp": FORWARD_MODE,
        "linearize": FORWARD_MODE,
        "check-grads-*": FLOAT64,
{%- if cookiecutter.backend != "tpu" %}
        "export-symbolic": SYMBOLIC,
{%- endif %}
{%- if cookiecutter.backend == "mosaic_gpu" %}
        **(INTERPRETED_SHARDED if SHARDS_INTERPRETED else {}),
        **({"checkpoint": CHECKPOINT_EFFECTS} if INTERPRETS else {}),
{%- elif cookiecutter.backend == "triton" %}
        "shard-map-*": INTERPRETER_VMA,
{%- endif %}
    },
)
