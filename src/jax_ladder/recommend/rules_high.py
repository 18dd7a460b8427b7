"""The recommend table's rules for the high rungs: 3 (memory and sharding) to 9
(JAX internals).

Lowest rung first; within a rung the more specific rule comes first, since it
wins ties. `table.RULES` puts these after `rules_low.RULES_LOW`.
"""

from __future__ import annotations

from jax_ladder.recommend.records import Rule, Starter

# On one device there is nothing to shard, and the rung's template is a sharded
# (FSDP) model: the remat + scan + donation asset is the starter that fits.
UNSHARDED_MEMORY = Starter(
    when={"devices": ("single",)},
    asset="memory-and-sharding/remat_scan_train_step.py",
    why="nothing is sharded, and the memory-and-sharding template is a sharded FSDP model",
)

# JAX's export compatibility promise, in one sentence that README.md and the
# export rung's page quote verbatim (tests/test_recommend.py holds them to it).
# JAX's export docs ("Compatibility guarantees"): an artifact can be compiled
# and run by a JAX up to 6 months newer than the exporter (and 3 weeks older);
# jax/_src/export/serialization.py retires serialization versions once they
# are past that window and refuses them with a ValueError.
EXPORT_WINDOW = (
    "JAX guarantees at least six months of backward compatibility: an artifact loads on any "
    "JAX release up to six months newer than the one that exported it; a later release "
    "refuses it once it retires the artifact's serialization format (by format, not by the "
    "file's date), so plan re-exports"
)

RULES_HIGH: tuple[Rule, ...] = (
    # -- rung 3: memory and sharding ---------------------------------------------------
    Rule(
        id="checkpoint-residuals",
        rung="memory-and-sharding",
        when={"gradients": ("yes",), "autodiff": ("too-much-memory",)},
        why="Reverse mode keeps the forward pass's residuals alive until the backward pass; "
        "jax.checkpoint recomputes them instead, trading FLOPs for memory.",
        use="jax.checkpoint (with a policy)",
        example=(
            "block = jax.checkpoint(jnp.tanh, policy=jax.checkpoint_policies.nothing_saveable)",
            "g = jax.grad(lambda x: block(block(x)).sum())(x)",
        ),
        rule_out=(
            "jax.ad_checkpoint.print_saved_residuals(f, x) to see what is stored",
            "a custom_vjp that saves less (rung 4) only if remat costs too much time",
        ),
        # The starter whose policy saves least (it even gathers weights again).
        new_args="--set remat=regather",
        starters=(UNSHARDED_MEMORY,),
    ),
    Rule(
        id="shard-map",
        rung="memory-and-sharding",
        when={"devices": ("explicit",)},
        why="You need to say which collective runs where (a ring, an overlap, a per-shard "
        "algorithm): shard_map gives per-device code with explicit psum, all_gather and ppermute. "
        "The example's mesh has Auto axes; under jax.make_mesh's Explicit default, in_specs must "
        "match how the input is already sharded.",
        use="jax.shard_map",
        example=(
            "mesh = jax.make_mesh((jax.device_count(),), ('x',), (jax.sharding.AxisType.Auto,))",
            "total = jax.shard_map(lambda a: lax.psum(a.sum(), 'x'), mesh=mesh, "
            "in_specs=jax.P('x'), out_specs=jax.P())(xs)",
        ),
        rule_out=(
            "jit with shardings first: the compiler's collectives are often as good",
            "turning check_vma off: it catches values you forgot to reduce",
        ),
    ),
    Rule(
        id="sharding",
        rung="memory-and-sharding",
        when={"devices": ("compiler",)},
        why="Put the data on a mesh and let XLA propagate shardings and insert collectives; the "
        "code stays single-device code.",
        use="jax.jit with jax.NamedSharding inputs",
        example=(
            "mesh = jax.make_mesh((jax.device_count(),), ('x',))",
            "y = jax.jit(jnp.sin)(jax.device_put(xs, jax.NamedSharding(mesh, jax.P('x'))))",
        ),
        rule_out=("more devices for a problem small enough that communication dominates",),
    ),
    Rule(
        id="distributed-simulated",
        rung="memory-and-sharding",
        when={"goal": ("distributed",), "devices": ("single",)},
        why="Distributed semantics matter but you answered a single device: write it with "
        "shardings and test on simulated CPU devices before renting a pod.",
        use="jax.sharding on simulated CPU devices",
        example=(
            "jax.config.update('jax_num_cpu_devices', 8)  # before the first JAX operation",
            "# or XLA_FLAGS=--xla_force_host_platform_device_count=8 in the environment",
        ),
    ),
    Rule(
        id="memory",
        rung="memory-and-sharding",
        when={"goal": ("memory",), "batch": ("none", "coupled")},
        why="Peak memory comes from buffers kept alive: donate the inputs you overwrite, and "
        "rematerialise activations instead of storing them.",
        use="donate_argnums and jax.checkpoint",
        example=(
            "update = jax.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)  # reuse p's buffer",
            "block = jax.checkpoint(jnp.tanh)  # recompute in the backward pass",
        ),
        rule_out=("measure first: jax.jit(f).lower(x).compile().memory_analysis()",),
        starters=(UNSHARDED_MEMORY,),
    ),
    # -- rung 4: custom derivatives ----------------------------------------------------
    Rule(
        id="custom-jvp",
        rung="custom-vjp",
        when={"gradients": ("yes",), "autodiff": ("wrong", "unstable")},
        why="The derivative of the formula is wrong or not finite where the function is well "
        "behaved (a norm at zero, a ratio of small numbers). A custom_jvp states the right "
        "derivative once and works in forward and reverse mode (custom_vjp refuses forward mode).",
        use="jax.custom_jvp",
        example=(
            "safe_norm = jax.custom_jvp(lambda x: jnp.sqrt(jnp.sum(x * x)))",
            "safe_norm.defjvp(lambda p, t: (safe_norm(p[0]), jnp.vdot(p[0], t[0]) / "
            "jnp.maximum(safe_norm(p[0]), 1e-12)))",
        ),
        rule_out=(
            "a stable forward formulation (logsumexp, log1p, the double-where trick), which often "
            "fixes the gradient with no rule",
        ),
        new_args="--set rule=jvp",
    ),
    Rule(
        id="custom-vjp",
        rung="custom-vjp",
        when={"gradients": ("yes",), "autodiff": ("too-slow",)},
        why="Autodiff differentiates through how you computed the result (every iteration of a "
        "solver); a custom VJP uses the maths instead (implicit differentiation, an analytic "
        "backward) and saves only what the backward pass needs.",
        use="jax.custom_vjp",
        example=(
            "f = jax.custom_vjp(jnp.tanh)",
            "f.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, g: (g * (1 - y * y),))",
        ),
        rule_out=(
            "lax.custom_root / lax.custom_linear_solve, which already differentiate solvers "
            "implicitly",
            "jax.checkpoint, if the cost is memory rather than time",
        ),
    ),
    # -- rung 5: export ----------------------------------------------------------------
    Rule(
        id="export",
        rung="export",
        when={"ship": ("serialize",)},
        why="Another process, machine or runtime must run it without your Python code: jax.export "
        "writes versioned StableHLO with symbolic shapes.",
        use="jax.export",
        example=(
            "spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape('b, 4'), jnp.float32)",
            "blob = jax.export.export(jax.jit(jnp.sin))(spec).serialize()",
        ),
        rule_out=(
            "jax.jit(f).lower(...).compile() and the persistent compilation cache, if you only "
            "need to skip compilation",
            EXPORT_WINDOW,
        ),
    ),
    # -- rung 6: custom partitioning ---------------------------------------------------
    Rule(
        id="custom-partitioning",
        rung="custom-partitioning",
        when={"devices": ("compiler",), "gather": ("yes",)},
        why="The partitioner cannot see inside this op and replicates it (an all-gather in the "
        "HLO), and a fixed shard_map would not survive the shardings its callers choose: "
        "custom_partitioning gives the op a Shardy sharding rule and a per-shard body.",
        use="jax.experimental.custom_partitioning.custom_partitioning",
        example=(
            "op = custom_partitioning(impl)",
            "op.def_partition(partition=partition, sharding_rule='b n -> b n')",
        ),
        rule_out=(
            "the all-gather itself: read the compiled HLO (JAX 0.12 already partitions e.g. a "
            "row-sharded FFT)",
            "a shard_map around the region, when its shardings are fixed",
        ),
    ),
    # -- rung 7: Pallas ----------------------------------------------------------------
    Rule(
        id="pallas-port-for-tpu",
        rung="pallas",
        when={"library": ("hot-path",), "backend": ("tpu",)},
        why="The library cannot run on TPU (the XLA FFI has no TPU route): port its hot kernel to "
        "jnp first, then to Pallas if a profile says so.",
        use="jax.experimental.pallas.pallas_call",
        example=(
            "def kernel(x_ref, o_ref): o_ref[...] = x_ref[...] * 2",
            "y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "interpret=True)(x)",
        ),
        rule_out=("a jnp port: it may already be fast enough, and it is the oracle",),
    ),
    Rule(
        id="pallas",
        rung="pallas",
        when={"hotspot": ("measured",)},
        why="A profile shows an op that XLA fuses or tiles badly (attention, a fused epilogue, "
        "ragged blocks); Pallas lets you choose the tiling and the memory traffic.",
        use="jax.experimental.pallas.pallas_call",
        example=(
            "def kernel(x_ref, o_ref): o_ref[...] = x_ref[...] * 2",
            "y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "interpret=True)(x)",
        ),
        rule_out=(
            "a different formulation, dtype or layout (read the optimised HLO)",
            "existing kernels: jax.nn.dot_product_attention(implementation='cudnn'), "
            "jax.experimental.pallas.ops",
        ),
        # The template's default backend is TPU; on GPU the pallas-gpu note says Mosaic GPU.
        starters=(Starter(when={"backend": ("gpu",)}, new_args="--set backend=mosaic_gpu"),),
    ),
    # -- rung 8: FFI -------------------------------------------------------------------
    Rule(
        id="ffi-cpu-kernel",
        rung="ffi",
        when={"hotspot": ("measured",), "backend": ("cpu",)},
        why="Pallas has no CPU compiler (interpret mode only), so on CPU a hand-written kernel is "
        "a C++ handler behind the XLA FFI.",
        use="jax.ffi.ffi_call",
        example=(
            "jax.ffi.register_ffi_target('my_op', my_ext.handler(), platform='cpu')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        rule_out=(
            "a naive C++ loop: it is easily slower than XLA (a single-threaded RMSNorm took 74-86 "
            "ms against 33 ms for jitted jnp on 4096x4096)",
        ),
        supersedes=("pallas",),
    ),
    Rule(
        id="ffi-cuda",
        rung="ffi",
        when={"library": ("hot-path",), "backend": ("gpu",)},
        why="A tuned CUDA implementation exists and sits on the hot path: an FFI handler launches "
        "it on XLA's stream inside the compiled program, with no host round trip.",
        use="jax.ffi.ffi_call with a CUDA handler",
        example=(
            "jax.ffi.register_ffi_target('my_op', my_ext.cuda_handler(), platform='CUDA')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        rule_out=(
            "a jnp port or a Pallas (Mosaic GPU) kernel if the library is small",
            "the costs: nvcc and a CUDA build per CUDA major version in your packaging",
        ),
        new_args="--set cuda=yes",
    ),
    Rule(
        id="ffi",
        rung="ffi",
        when={"library": ("hot-path",), "backend": ("any", "cpu", "gpu")},
        why="A tuned C++/CUDA implementation exists and sits on the hot path: the XLA FFI calls it "
        "inside the compiled program, with no host round trip and no Python.",
        use="jax.ffi.ffi_call",
        example=(
            "jax.ffi.register_ffi_target('my_op', my_ext.handler(), platform='cpu')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        rule_out=(
            "a jnp port (keeps autodiff, vmap, sharding and every backend) if it is small",
            "jax.pure_callback, if a profile shows it is not on the hot path after all",
            "the costs: no TPU route, and a C++ build in your packaging (wheels per platform)",
        ),
    ),
    # -- rung 9: internals -------------------------------------------------------------
    Rule(
        id="new-primitive",
        rung="internals",
        when={"internals": ("new-primitive",)},
        why="Only a primitive carries its own abstract evaluation, JVP/transpose, batching and "
        "lowering rules. jax.extend has no compatibility guarantee: pin the JAX minor version.",
        use="jax.extend.core.Primitive with jax.interpreters.{ad, batching, mlir}",
        example=(
            "from jax.extend.core import Primitive; p = Primitive('my_op'); p.def_impl(jnp.sin)",
            "p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))",
        ),
        rule_out=(
            "custom_jvp/custom_vjp (a derivative), jax.custom_batching.custom_vmap (a batching "
            "rule), custom_partitioning (a sharding rule), jax.ffi (a foreign kernel)",
        ),
    ),
    Rule(
        id="change-jax",
        rung="internals",
        when={"internals": ("change-jax",)},
        why="You need behaviour JAX does not have: find where the concept lives, change it with "
        "the upstream tests beside it, and send it upstream.",
        use="jax-ladder locate, then JAX's own tests",
        example=(
            "jax-ladder locate while_loop --repo ~/src/jax",
            "python -m pytest ~/src/jax/tests/lax_control_flow_test.py -k while",
        ),
        rule_out=(
            "a minimal reproducer filed upstream first: a fork is yours to maintain",
            "a workaround at a lower rung (a custom rule, a flag)",
        ),
    ),
)
