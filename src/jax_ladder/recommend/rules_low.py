"""The recommend table's rules for the low rungs: 1 (plain JAX) and 2 (control flow
and other transforms).

Lowest rung first; within a rung the more specific rule comes first, since it
wins ties. `table.RULES` puts these before `rules_high.RULES_HIGH`.
"""

from __future__ import annotations

from jax_ladder.recommend.records import Rule

RULES_LOW: tuple[Rule, ...] = (
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
)
