"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

TODO: declare your op: its arguments and their named axes, the sizes the
cells use, which axes shard with no communication, the tolerances it needs,
and for each cell it does not support, the error it raises and what to use
instead. OpSpec(oracle=None): the reference run in float64 is the oracle.
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

from compare import Ulps
from conformance import Arg, OpSpec, Refuse
{%- if cookiecutter.backend == "mosaic_gpu" %}
from devices import mesh_devices
{%- endif %}

# TODO: the errors your op may make, in ulps of the dtype. The identity is
# exact: 0 would do; 1 leaves room for a cast.
VALUES = Ulps(at_value=1, at_scale=1)
GRADIENTS = Ulps(at_value=1, at_scale=1)

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
    "grad-grad-explicit-*": SEVERAL_DEVICES,
    "jit-auto-*": PARTITIONED,
}
{%- elif cookiecutter.backend == "triton" %}
# Inside jax.shard_map with check_vma=True, Pallas's generic interpreter (JAX
# 0.12's pallas_call_hlo_interpret, this backend's only one) replays the kernel
# body, traced without varying axes, on varying blocks, and fails JAX's check
# of varying axes: the interpreted kernel refuses. (The TPU backend runs these
# cells in Pallas's TPU interpreter.)
INTERPRETER_VMA = Refuse(
    NotImplementedError,
    r"the kernel: the operands vary over the mesh axes .* pass check_vma=False",
    "interpreted: check_vma=False only",
)
{%- endif %}

{%- if cookiecutter.backend != "tpu" %}

# Pallas on GPUs cannot size the kernel's grid or blocks symbolically
# (jax-ml/jax#24960): export with concrete shapes.
SYMBOLIC = Refuse(
    NotImplementedError,
    r"the kernel: symbolic sizes",
    "refused: no symbolic sizes on this backend (jax-ml/jax#24960)",
)
{%- endif %}

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
{%- if cookiecutter.backend == "tpu" %}
    platforms={"cpu": "", "tpu": r"tpu_custom_call"},
{%- elif cookiecutter.backend == "mosaic_gpu" %}
    # None: interpreted here, the kernel's io_callbacks cannot be serialized.
    platforms={},
{%- else %}
    # Triton lowers only under an abstract GPU device (tests/target.py).
    platforms={"cpu": ""},
{%- endif %}
    refuse={
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
