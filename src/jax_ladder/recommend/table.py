"""The recommend table: the questions, the rules and the notes, all data.

Each rule names the *lowest* rung that meets one need stated in the answers (a
data-dependent loop needs `lax.while_loop`, rung 2; a serialized artifact needs
`jax.export`, rung 5). Rules are listed lowest rung first, from 1 (plain JAX)
to 9 (JAX internals); within a rung the more specific rule comes first and
wins ties. With no need at all, the fallback rule (the one without
conditions) says plain JAX. Notes are caveats for a recommended rung.
`check.check_table()` proves the table consistent.
"""

from __future__ import annotations

from jax_ladder.recommend.records import Conditions, Note, Question, Rule, Starter

LOOPING: Conditions = {"loop": ("static", "data-dependent")}

# Asked in this order; a question's `only_if` names earlier questions only.
QUESTIONS: tuple[Question, ...] = (
    Question(
        key="loop",
        text="Does it loop, and is the iteration count static or data-dependent?",
        choices=("none", "static", "data-dependent"),
        hint="static: known when tracing (a Python int); data-dependent: decided by array values",
    ),
    Question(
        key="carry",
        text="Does the loop carry keep one shape and dtype on every iteration?",
        choices=("fixed", "varying"),
        only_if=LOOPING,
    ),
    Question(
        key="outputs",
        text="Do you need outputs from every step, or only the final state?",
        choices=("final", "every-step"),
        only_if=LOOPING,
    ),
    Question(
        key="batch",
        text="Is there a batch of computations, and are they independent of each other?",
        choices=("none", "independent", "coupled"),
        hint="coupled: examples interact (batch statistics, attention across the batch)",
    ),
    Question(
        key="branch",
        text="Does a branch depend on array values (not on shapes or Python settings)?",
        choices=("no", "yes"),
    ),
    Question(
        key="gradients",
        text="Do you differentiate through it (jax.grad, jax.vjp, jax.jvp)?",
        choices=("no", "yes"),
    ),
    Question(
        key="autodiff",
        text="Is default autodiff wrong, unstable, too slow or too memory-hungry here?",
        choices=("fine", "wrong", "unstable", "too-slow", "too-much-memory"),
        hint="wrong/unstable: NaN, inf or a wrong value where the function is well behaved",
        only_if={"gradients": ("yes",)},
    ),
    Question(
        key="goal",
        text="What matters most: clarity, compile time, run time, memory, or distributed "
        "semantics?",
        choices=("clarity", "compile-time", "run-time", "memory", "distributed"),
    ),
    Question(
        key="ship",
        text="Must it be compiled ahead of time, or serialized?",
        choices=("no", "warm-start", "serialize"),
        hint="warm-start: compile before the first call or reuse compilations across runs; "
        "serialize: another process, machine or runtime runs it without your Python code",
    ),
    Question(
        key="devices",
        text="Multi-device: should the compiler decide the communication, or do you need explicit "
        "collectives?",
        choices=("single", "compiler", "explicit"),
    ),
    Question(
        key="gather",
        text="Does the partitioner all-gather or replicate an op on sharded inputs, and must the "
        "op work under whatever shardings its callers choose (so one fixed shard_map will not do)?",
        choices=("no", "yes"),
        hint="check the compiled HLO: jax.jit(f).lower(x).compile().as_text()",
        only_if={"devices": ("compiler",)},
    ),
    Question(
        key="hotspot",
        text="Is there a measured kernel-level hotspot that XLA cannot fix?",
        choices=("no", "suspected", "measured"),
        hint="measured: a profile shows one op dominating after formulation changes were tried",
    ),
    Question(
        key="library",
        text="Does a C++/CUDA library already exist for this computation?",
        choices=("no", "off-hot-path", "hot-path"),
        hint="off-hot-path: called rarely (setup, logging); hot-path: inside the step you optimise",
    ),
    Question(
        key="backend",
        text="Which backend must it run on?",
        choices=("any", "cpu", "gpu", "tpu"),
    ),
    Question(
        key="internals",
        text="Do you need a new primitive with its own transformation rules, or a change to JAX?",
        choices=("no", "new-primitive", "change-jax"),
    ),
)

QUESTION = {q.key: q for q in QUESTIONS}

# On one device there is nothing to shard, and the rung's template is a sharded
# (FSDP) model: the remat + scan + donation asset is the starter that fits.
UNSHARDED_MEMORY = Starter(
    when={"devices": ("single",)},
    asset="memory-and-sharding/remat_scan_train_step.py",
    why="nothing is sharded, and the memory-and-sharding template is a sharded FSDP model",
)

# JAX's export compatibility promise, in one sentence that docs/projects.md and the
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

RULES: tuple[Rule, ...] = (
    # -- rung 1: plain JAX -------------------------------------------------------------
    Rule(
        id="python-loop-unrolled",
        rung="plain-jax",
        when={"loop": ("static",), "carry": ("varying",)},
        why="scan and fori_loop need one carry shape. With a static count, a Python loop under jit "
        "unrolls, so every iteration gets its own static shape; compile time grows with the count, "
        "so keep it short.",
        use="a Python for-loop under jax.jit",
        example=(
            "grow = lambda x: jnp.concatenate([x, x[-1:] * 2])  # a new shape every step",
            "f = jax.jit(lambda x: grow(grow(grow(x))))  # what a Python loop unrolls to",
        ),
        rule_out=("padding to the largest shape and lax.scan, if the count is large",),
    ),
    Rule(
        id="pure-callback",
        rung="plain-jax",
        when={"library": ("off-hot-path",)},
        why="Off the hot path, calling the library's Python bindings from the host is enough: no "
        "C++ build. It runs on the host (a device-to-host copy on accelerators) and has no "
        "autodiff rule (wrap it in jax.custom_vjp if you differentiate through it).",
        use="jax.pure_callback",
        example=(
            "spec = jax.ShapeDtypeStruct(x.shape, x.dtype)",
            "y = jax.pure_callback(lambda a: np.sort(a).astype(a.dtype), spec, x, "
            "vmap_method='sequential')",
        ),
        rule_out=("the XLA FFI (rung 8) only once a profile puts the call on the hot path",),
    ),
    Rule(
        id="profile-first",
        rung="plain-jax",
        when={"hotspot": ("suspected",)},
        why="A suspected hotspot is not a reason to climb: profile, read the optimised HLO and try "
        "other formulations first. Climb to a kernel only with a measurement (answer "
        "hotspot=measured).",
        use="jax.profiler and the compiled HLO",
        example=(
            "with jax.profiler.trace('/tmp/jax-trace'): jax.block_until_ready(f(x))",
            "hlo = jax.jit(f).lower(x).compile().as_text()  # what did XLA fuse?",
        ),
        rule_out=("timing without jax.block_until_ready (dispatch is asynchronous)",),
    ),
    Rule(
        id="aot-warm-start",
        rung="plain-jax",
        when={"ship": ("warm-start",)},
        why="Compiling before the first call, or reusing compilations across runs, needs no "
        "serialized artifact: lower and compile ahead of time, and turn on the persistent "
        "compilation cache.",
        use="jax.jit(f).lower(...).compile() and the persistent compilation cache",
        example=(
            "jax.config.update('jax_compilation_cache_dir', '/tmp/jax-cache')",
            "compiled = jax.jit(f).lower(jax.ShapeDtypeStruct(x.shape, x.dtype)).compile()",
        ),
        rule_out=(
            "jax.export (rung 5): only when another process or machine runs it without your code",
        ),
    ),
    Rule(
        id="compile-time",
        rung="plain-jax",
        when={"goal": ("compile-time",)},
        why="Without a loop to roll up, compile time is mostly retracing (new shapes, new static "
        "values) and cold starts: cache, and bucket shapes, before restructuring.",
        use="the persistent compilation cache; static_argnames only where needed",
        example=(
            "jax.config.update('jax_compilation_cache_dir', '/tmp/jax-cache')",
            "g = jax.jit(lambda x, n: x * n, static_argnames='n')  # each new n recompiles",
        ),
        rule_out=(
            "jax.log_compiles (jax.config.update('jax_log_compiles', True)) to count retraces",
        ),
    ),
    Rule(
        id="run-time",
        rung="plain-jax",
        when={"goal": ("run-time",)},
        why="Most lost run time is dispatch, host syncs and recompiles, not kernels: jit the whole "
        "step, keep data on the device, block only to time.",
        use="jax.jit over the whole step, with donate_argnums",
        example=(
            "step = jax.jit(lambda s, b: s + b.sum(), donate_argnums=0)",
            "state = jax.block_until_ready(step(jnp.zeros(()), x))  # block to time it",
        ),
        rule_out=("a kernel (rung 7) before a profile shows one op dominating",),
    ),
    Rule(
        id="where",
        rung="plain-jax",
        when={"branch": ("yes",), "batch": ("independent", "coupled")},
        why="The predicate is per example, so the branch is a select. lax.cond with a batched "
        "predicate becomes a select under vmap anyway (both branches run), so write jnp.where.",
        use="jnp.where",
        example=(
            "y = jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)",
            "# the inner where keeps the untaken branch finite, so gradients stay finite",
        ),
        rule_out=("lax.cond: only pays off for an unbatched predicate and an expensive branch",),
    ),
    Rule(
        id="vmap",
        rung="plain-jax",
        when={"batch": ("independent",)},
        why="Write the function for one example and let vmap batch it: no loop, no manual batch "
        "axis, and the compiler sees one batched program.",
        use="jax.vmap",
        example=(
            "per_example = jax.vmap(lambda w, x: jnp.dot(w, x), in_axes=(None, 0))",
            "ys = per_example(w, xs)  # w shared, xs mapped over its first axis",
        ),
        rule_out=("a Python loop over examples (one dispatch each, or a huge unrolled graph)",),
    ),
    Rule(
        id="batched-jnp",
        rung="plain-jax",
        when={"batch": ("coupled",)},
        why="Examples that interact (batch statistics, attention across the batch) are ordinary "
        "array maths over a batch axis: write them with jnp reductions and einsum.",
        use="jnp reductions and jnp.einsum over the batch axis",
        example=(
            "centred = xs - xs.mean(axis=0, keepdims=True)  # statistics across the batch",
            "gram = jnp.einsum('bi,ci->bc', xs, xs)  # every pair of examples",
        ),
    ),
    Rule(
        id="plain-jax",
        rung="plain-jax",
        when={},
        why="Nothing in the answers needs more than jit, grad, vmap and jnp. The plain program is "
        "the clearest, and it will be the oracle for anything you build later.",
        use="jax.jit, jax.grad, jax.vmap and jax.numpy",
        example=(
            "loss = lambda w, x: jnp.mean((x @ w) ** 2)",
            "g = jax.jit(jax.grad(loss))(w, xs)",
        ),
    ),
    # -- rung 2: control flow and other transforms -------------------------------------
    Rule(
        id="scan-bounded-outputs",
        rung="transforms",
        when={"loop": ("data-dependent",), "outputs": ("every-step",)},
        why="lax.while_loop cannot return per-step outputs (their number is unknown when tracing). "
        "A scan to a static maximum with a convergence mask can, and it is reverse-differentiable.",
        use="lax.scan to a static maximum, masked after convergence",
        example=(
            "def body(x, _): x = jnp.where(jnp.abs(x - 1.0) > 1e-6, step(x), x); return x, x",
            "x_final, history = lax.scan(body, x0, length=50)",
        ),
        rule_out=("lax.while_loop: it only returns the final state",),
        supersedes=("while-loop",),
    ),
    Rule(
        id="scan-bounded-grad",
        rung="transforms",
        when={"loop": ("data-dependent",), "gradients": ("yes",)},
        why="jax.grad through lax.while_loop fails: reverse mode needs a static trip count "
        "(forward mode works). Scan to a static maximum with a mask; if that maximum is large, "
        "implicit differentiation (custom_vjp, rung 4) is cheaper.",
        use="lax.scan to a static maximum, masked after convergence",
        example=(
            "def body(x, _): return jnp.where(jnp.abs(x - 1.0) > 1e-6, step(x), x), None",
            "x_final, _ = lax.scan(body, x0, length=50)",
        ),
        rule_out=(
            "lax.custom_root / lax.custom_linear_solve, which already differentiate root finding "
            "and linear solves implicitly",
        ),
        supersedes=("while-loop",),
    ),
    Rule(
        id="while-padded",
        rung="transforms",
        when={"loop": ("data-dependent",), "carry": ("varying",)},
        why="A loop carry must keep one shape and dtype. Pad to the largest size, carry the length "
        "in use, and mask.",
        use="lax.while_loop over a padded carry",
        example=(
            "def body(s): buf, n = s; return buf.at[n].set(buf[n - 1] * 2), n + 1",
            "buf, n = lax.while_loop(lambda s: (s[1] < s[0].size) & (s[0][s[1] - 1] < 100), body, "
            "(jnp.ones(16), 1))",
        ),
        rule_out=("a Python loop: its length is data-dependent, so it cannot be traced",),
        supersedes=("while-loop",),
    ),
    Rule(
        id="while-loop",
        rung="transforms",
        when={"loop": ("data-dependent",)},
        why="A Python loop on a traced value fails (TracerBoolConversionError). lax.while_loop "
        "compiles the body once and runs on the device until the predicate fails. It is not "
        "reverse-differentiable: if you need jax.grad, answer gradients=yes.",
        use="lax.while_loop",
        example=(
            "cond = lambda s: jnp.max(jnp.abs(s[0] - s[1])) > 1e-6",
            "x, _ = lax.while_loop(cond, lambda s: (step(s[0]), s[0]), (step(x0), x0))",
        ),
        rule_out=("host-side loops that call a jitted step (a device sync per iteration)",),
    ),
    Rule(
        id="lax-map-memory",
        rung="transforms",
        when={"goal": ("memory",), "batch": ("independent",)},
        why="vmap materialises every example's intermediates at once. lax.map with batch_size runs "
        "vmapped chunks one after another and bounds peak memory.",
        use="lax.map with batch_size",
        example=(
            "ys = lax.map(jnp.sort, xs, batch_size=16)  # vmap over 16 at a time",
            "# instead of jax.vmap(jnp.sort)(xs), which holds every example's buffers",
        ),
        rule_out=("jax.checkpoint, if the memory is autodiff residuals (answer autodiff)",),
        supersedes=("vmap", "vmap-over-loop"),
    ),
    Rule(
        id="vmap-over-loop",
        rung="transforms",
        when={"loop": ("static",), "batch": ("independent",)},
        why="A loop over independent items is vmap's case: write the function for one item and "
        "vmap it, so the compiler sees one batched program. Any loop inside one item's "
        "computation (listed below) goes inside the vmapped function.",
        use="jax.vmap over the per-item function",
        example=(
            "one = lambda x: lax.fori_loop(0, 10, lambda i, c: step(c), x)  # one item's loop",
            "ys = jax.vmap(one)(xs)  # every item at once, no loop over items",
        ),
        rule_out=(
            "a Python loop or lax.fori_loop over the items: one item after another, for no "
            "dependency between them",
        ),
        supersedes=("vmap",),
    ),
    Rule(
        id="scan-padded",
        rung="transforms",
        when={"loop": ("static",), "carry": ("varying",), "goal": ("compile-time",)},
        why="An unrolled Python loop compiles every iteration separately. Pad the carry to its "
        "largest shape, carry the length in use, and scan: the body compiles once.",
        use="lax.scan over a padded carry",
        example=(
            "def body(s, _): buf, n = s; return (buf.at[n].set(buf[n - 1] * 2), n + 1), None",
            "(buf, n), _ = lax.scan(body, (x0.at[0].set(1), 1), length=x0.shape[0] - 1)",
        ),
        supersedes=("python-loop-unrolled",),
    ),
    Rule(
        id="scan",
        rung="transforms",
        when={"loop": ("static",), "carry": ("fixed",), "outputs": ("every-step",)},
        why="A fixed carry with per-step outputs is exactly scan: the body compiles once (a Python "
        "loop under jit unrolls, and compile time grows with the count) and the outputs come back "
        "stacked.",
        use="lax.scan",
        example=(
            "def ema(c, x): c = 0.9 * c + 0.1 * x; return c, c",
            "final, history = lax.scan(ema, jnp.zeros_like(xs[0]), xs)",
        ),
        rule_out=("scan's unroll= argument trades compile time for run time on short bodies",),
    ),
    Rule(
        id="fori-loop",
        rung="transforms",
        when={"loop": ("static",), "carry": ("fixed",), "outputs": ("final",)},
        why="Only the final state is needed. fori_loop with static bounds compiles the body once "
        "and, being a scan underneath, is reverse-differentiable.",
        use="lax.fori_loop",
        example=(
            "x = lax.fori_loop(0, 100, lambda i, x: step(x), x0)",
            "# static bounds: lowered to a scan, so jax.grad works",
        ),
        rule_out=("a Python loop under jit for more than a few iterations (compile time)",),
    ),
    Rule(
        id="cond",
        rung="transforms",
        when={"branch": ("yes",), "batch": ("none",)},
        why="A Python `if` on a traced value fails. lax.cond traces both branches and runs one; if "
        "both sides are cheap, jnp.where is simpler.",
        use="lax.cond (lax.switch for n branches)",
        example=(
            "y = lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)  # one branch runs",
            "z = lax.switch(jnp.int32(1), [jnp.sin, jnp.cos, jnp.tanh], x)",
        ),
        rule_out=("branching on shapes or Python settings: that is ordinary Python at trace time",),
    ),
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

NOTES: tuple[Note, ...] = (
    Note(
        id="kernel-gradients",
        when={"gradients": ("yes",)},
        rungs=("custom-partitioning", "pallas", "ffi"),
        text="It has no autodiff rule of its own: wrap it in jax.custom_vjp whose forward and "
        "backward call it (the kit's templates do this).",
    ),
    Note(
        id="export-gradients",
        when={"gradients": ("yes",)},
        rungs=("export",),
        text="Serialize with vjp_order=1 to differentiate the deserialized function; without it "
        "grad raises 'No VJP is available'.",
    ),
    Note(
        id="ffi-vmap",
        when={"batch": ("independent",)},
        rungs=("ffi",),
        text="ffi_call refuses vmap unless you pass vmap_method ('sequential', "
        "'sequential_unrolled', 'expand_dims', 'broadcast_all').",
    ),
    Note(
        id="ffi-sharding",
        when={"devices": ("compiler", "explicit")},
        rungs=("ffi",),
        text="Under sharding an FFI call is replicated unless its target is registered with "
        "jax.ffi.register_ffi_target_as_batch_partitionable, or it runs inside shard_map.",
    ),
    Note(
        id="pallas-gpu",
        when={"backend": ("gpu", "any")},
        rungs=("pallas",),
        text="On GPU, write Mosaic GPU kernels (Hopper, sm_90a); the Pallas Triton backend is "
        "deprecated and warns when lowering on JAX 0.12.",
    ),
    Note(
        id="per-backend",
        when={"backend": ("any",)},
        rungs=("pallas", "ffi"),
        text="Kernels are per backend: keep the plain-JAX version as the fallback on the others "
        "and as the test oracle.",
    ),
    Note(
        id="explicit-mesh",
        when={"devices": ("compiler",)},
        rungs=("memory-and-sharding", "custom-partitioning"),
        text="jax.make_mesh makes Explicit axes by default on JAX 0.12; pass "
        "axis_types=(jax.sharding.AxisType.Auto,) * ndim for compiler-decided propagation "
        "(custom_partitioning ops fail at run time under an Explicit mesh).",
    ),
)
