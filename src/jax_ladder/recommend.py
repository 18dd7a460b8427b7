"""`jax-ladder recommend`: the questions that decide the rung, and the rules.

Both are data. Each rule names the *lowest* rung that meets one need stated in
the answers (a data-dependent loop needs `lax.while_loop`, rung 2; a
serialized artifact needs `jax.export`, rung 5). The recommendation is the
lowest rung that meets *every* need, so it is the highest rung among the
matching rules; the other matching rules are mechanisms to use inside it.
Rules are listed lowest rung first; within a rung the more specific rule comes
first and wins ties. With no need at all, the fallback rule says plain JAX.

`check_table()` proves the table consistent: every key and value exists,
every rule is reachable (some answers make it the recommendation), every rung
is reached, and every note can be printed.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jax_ladder.options import UsageError, check_choice, split_assignment
from jax_ladder.rungs import LADDER, Rung, by_name

Conditions = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Question:
    key: str
    text: str
    choices: tuple[str, ...]  # the first is the default
    hint: str = ""  # what the choices mean, shown when asking
    # Asked only when every earlier answer named here is one of the values.
    only_if: Conditions = field(default_factory=dict)

    @property
    def default(self) -> str:
        return self.choices[0]


@dataclass(frozen=True)
class Rule:
    id: str
    rung: str  # a rung name from the registry
    when: Conditions  # key -> accepted answers; all must hold
    why: str
    use: str  # the primitive or API to reach for
    example: tuple[str, str]  # two lines of Python (or shell, for rung 9)
    rule_out: tuple[str, ...] = ()
    new_args: str = ""  # extra `jax-ladder new` arguments where the rung has a template
    # Rules this one replaces when both match (not listed under "Also, inside it").
    supersedes: tuple[str, ...] = ()

    def matches(self, answers: Mapping[str, str]) -> bool:
        return all(answers[key] in values for key, values in self.when.items())


@dataclass(frozen=True)
class Note:
    """A caveat printed when its answers hold and the recommendation is one of `rungs`."""

    id: str
    when: Conditions
    rungs: tuple[str, ...]
    text: str

    def applies(self, answers: Mapping[str, str], rung: str) -> bool:
        return rung in self.rungs and all(answers[k] in v for k, v in self.when.items())


LOOPING = {"loop": ("static", "data-dependent")}

QUESTIONS: tuple[Question, ...] = (
    Question(
        "loop",
        "Does it loop, and is the iteration count static or data-dependent?",
        ("none", "static", "data-dependent"),
        "static: known when tracing (a Python int); data-dependent: decided by array values",
    ),
    Question(
        "carry",
        "Does the loop carry keep one shape and dtype on every iteration?",
        ("fixed", "varying"),
        only_if=LOOPING,
    ),
    Question(
        "outputs",
        "Do you need outputs from every step, or only the final state?",
        ("final", "every-step"),
        only_if=LOOPING,
    ),
    Question(
        "batch",
        "Is there a batch of computations, and are they independent of each other?",
        ("none", "independent", "coupled"),
        "coupled: examples interact (batch statistics, attention across the batch)",
    ),
    Question(
        "branch",
        "Does a branch depend on array values (not on shapes or Python settings)?",
        ("no", "yes"),
    ),
    Question(
        "gradients",
        "Do you differentiate through it (jax.grad, jax.vjp, jax.jvp)?",
        ("no", "yes"),
    ),
    Question(
        "autodiff",
        "Is default autodiff wrong, unstable, too slow or too memory-hungry here?",
        ("fine", "wrong", "unstable", "too-slow", "too-much-memory"),
        "wrong/unstable: NaN, inf or a wrong value where the function is well behaved",
        only_if={"gradients": ("yes",)},
    ),
    Question(
        "goal",
        "What matters most: clarity, compile time, run time, memory, or distributed semantics?",
        ("clarity", "compile-time", "run-time", "memory", "distributed"),
    ),
    Question(
        "ship",
        "Must it be compiled ahead of time, or serialized?",
        ("no", "warm-start", "serialize"),
        "warm-start: compile before the first call or reuse compilations across runs; "
        "serialize: another process, machine or runtime runs it without your Python code",
    ),
    Question(
        "devices",
        "Multi-device: should the compiler decide the communication, or do you need "
        "explicit collectives?",
        ("single", "compiler", "explicit"),
    ),
    Question(
        "gather",
        "Does the partitioner all-gather or replicate an op on sharded inputs, and must the "
        "op work under whatever shardings its callers choose (so one fixed shard_map will "
        "not do)?",
        ("no", "yes"),
        "check the compiled HLO: jax.jit(f).lower(x).compile().as_text()",
        only_if={"devices": ("compiler",)},
    ),
    Question(
        "hotspot",
        "Is there a measured kernel-level hotspot that XLA cannot fix?",
        ("no", "suspected", "measured"),
        "measured: a profile shows one op dominating after formulation changes were tried",
    ),
    Question(
        "library",
        "Does a C++/CUDA library already exist for this computation?",
        ("no", "off-hot-path", "hot-path"),
        "off-hot-path: called rarely (setup, logging); hot-path: inside the step you optimise",
    ),
    Question(
        "backend",
        "Which backend must it run on?",
        ("any", "cpu", "gpu", "tpu"),
    ),
    Question(
        "internals",
        "Do you need a new primitive with its own transformation rules, or a change to JAX?",
        ("no", "new-primitive", "change-jax"),
    ),
)

QUESTION = {q.key: q for q in QUESTIONS}

# Lowest rung first. Within a rung, more specific rules first (they win ties).
RULES: tuple[Rule, ...] = (
    # -- rung 1: plain JAX --------------------------------------------------
    Rule(
        "python-loop-unrolled",
        "plain-jax",
        {"loop": ("static",), "carry": ("varying",)},
        "scan and fori_loop need one carry shape. With a static count, a Python loop under "
        "jit unrolls, so every iteration gets its own static shape; compile time grows with "
        "the count, so keep it short.",
        "a Python for-loop under jax.jit",
        (
            "grow = lambda x: jnp.concatenate([x, x[-1:] * 2])  # a new shape every step",
            "f = jax.jit(lambda x: grow(grow(grow(x))))  # what a Python loop unrolls to",
        ),
        ("padding to the largest shape and lax.scan, if the count is large",),
    ),
    Rule(
        "pure-callback",
        "plain-jax",
        {"library": ("off-hot-path",)},
        "Off the hot path, calling the library's Python bindings from the host is enough: "
        "no C++ build. It runs on the host (a device-to-host copy on accelerators) and has "
        "no autodiff rule (wrap it in jax.custom_vjp if you differentiate through it).",
        "jax.pure_callback",
        (
            "spec = jax.ShapeDtypeStruct(x.shape, x.dtype)",
            "y = jax.pure_callback(lambda a: np.sort(a).astype(a.dtype), spec, x, "
            "vmap_method='sequential')",
        ),
        ("the XLA FFI (rung 8) only once a profile puts the call on the hot path",),
    ),
    Rule(
        "profile-first",
        "plain-jax",
        {"hotspot": ("suspected",)},
        "A suspected hotspot is not a reason to climb: profile, read the optimised HLO and "
        "try other formulations first. Climb to a kernel only with a measurement "
        "(answer hotspot=measured).",
        "jax.profiler and the compiled HLO",
        (
            "with jax.profiler.trace('/tmp/jax-trace'): jax.block_until_ready(f(x))",
            "hlo = jax.jit(f).lower(x).compile().as_text()  # what did XLA fuse?",
        ),
        ("timing without jax.block_until_ready (dispatch is asynchronous)",),
    ),
    Rule(
        "aot-warm-start",
        "plain-jax",
        {"ship": ("warm-start",)},
        "Compiling before the first call, or reusing compilations across runs, needs no "
        "serialized artifact: lower and compile ahead of time, and turn on the persistent "
        "compilation cache.",
        "jax.jit(f).lower(...).compile() and the persistent compilation cache",
        (
            "jax.config.update('jax_compilation_cache_dir', '/tmp/jax-cache')",
            "compiled = jax.jit(f).lower(jax.ShapeDtypeStruct(x.shape, x.dtype)).compile()",
        ),
        ("jax.export (rung 5): only when another process or machine runs it without your code",),
    ),
    Rule(
        "compile-time",
        "plain-jax",
        {"goal": ("compile-time",)},
        "Without a loop to roll up, compile time is mostly retracing (new shapes, new static "
        "values) and cold starts: cache, and bucket shapes, before restructuring.",
        "the persistent compilation cache; static_argnames only where needed",
        (
            "jax.config.update('jax_compilation_cache_dir', '/tmp/jax-cache')",
            "g = jax.jit(lambda x, n: x * n, static_argnames='n')  # each new n recompiles",
        ),
        ("jax.log_compiles (jax.config.update('jax_log_compiles', True)) to count retraces",),
    ),
    Rule(
        "run-time",
        "plain-jax",
        {"goal": ("run-time",)},
        "Most lost run time is dispatch, host syncs and recompiles, not kernels: jit the "
        "whole step, keep data on the device, block only to time.",
        "jax.jit over the whole step, with donate_argnums",
        (
            "step = jax.jit(lambda s, b: s + b.sum(), donate_argnums=0)",
            "state = jax.block_until_ready(step(jnp.zeros(()), x))  # block to time it",
        ),
        ("a kernel (rung 7) before a profile shows one op dominating",),
    ),
    Rule(
        "where",
        "plain-jax",
        {"branch": ("yes",), "batch": ("independent", "coupled")},
        "The predicate is per example, so the branch is a select. lax.cond with a batched "
        "predicate becomes a select under vmap anyway (both branches run), so write "
        "jnp.where.",
        "jnp.where",
        (
            "y = jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)",
            "# the inner where keeps the untaken branch finite, so gradients stay finite",
        ),
        ("lax.cond: only pays off for an unbatched predicate and an expensive branch",),
    ),
    Rule(
        "vmap",
        "plain-jax",
        {"batch": ("independent",)},
        "Write the function for one example and let vmap batch it: no loop, no manual "
        "batch axis, and the compiler sees one batched program.",
        "jax.vmap",
        (
            "per_example = jax.vmap(lambda w, x: jnp.dot(w, x), in_axes=(None, 0))",
            "ys = per_example(w, xs)  # w shared, xs mapped over its first axis",
        ),
        ("a Python loop over examples (one dispatch each, or a huge unrolled graph)",),
    ),
    Rule(
        "batched-jnp",
        "plain-jax",
        {"batch": ("coupled",)},
        "Examples that interact (batch statistics, attention across the batch) are ordinary "
        "array maths over a batch axis: write them with jnp reductions and einsum.",
        "jnp reductions and jnp.einsum over the batch axis",
        (
            "centred = xs - xs.mean(axis=0, keepdims=True)  # statistics across the batch",
            "gram = jnp.einsum('bi,ci->bc', xs, xs)  # every pair of examples",
        ),
    ),
    Rule(
        "plain-jax",
        "plain-jax",
        {},
        "Nothing in the answers needs more than jit, grad, vmap and jnp. The plain program "
        "is the clearest, and it will be the oracle for anything you build later.",
        "jax.jit, jax.grad, jax.vmap and jax.numpy",
        (
            "loss = lambda w, x: jnp.mean((x @ w) ** 2)",
            "g = jax.jit(jax.grad(loss))(w, xs)",
        ),
    ),
    # -- rung 2: control flow and other transforms --------------------------
    Rule(
        "scan-bounded-outputs",
        "transforms",
        {"loop": ("data-dependent",), "outputs": ("every-step",)},
        "lax.while_loop cannot return per-step outputs (their number is unknown when "
        "tracing). A scan to a static maximum with a convergence mask can, and it is "
        "reverse-differentiable.",
        "lax.scan to a static maximum, masked after convergence",
        (
            "def body(x, _): x = jnp.where(jnp.abs(x - 1.0) > 1e-6, step(x), x); return x, x",
            "x_final, history = lax.scan(body, x0, length=50)",
        ),
        ("lax.while_loop: it only returns the final state",),
        supersedes=("while-loop",),
    ),
    Rule(
        "scan-bounded-grad",
        "transforms",
        {"loop": ("data-dependent",), "gradients": ("yes",)},
        "jax.grad through lax.while_loop fails: reverse mode needs a static trip count "
        "(forward mode works). Scan to a static maximum with a mask; if that maximum is "
        "large, implicit differentiation (custom_vjp, rung 4) is cheaper.",
        "lax.scan to a static maximum, masked after convergence",
        (
            "def body(x, _): return jnp.where(jnp.abs(x - 1.0) > 1e-6, step(x), x), None",
            "x_final, _ = lax.scan(body, x0, length=50)",
        ),
        (
            "lax.custom_root / lax.custom_linear_solve, which already differentiate "
            "root finding and linear solves implicitly",
        ),
        supersedes=("while-loop",),
    ),
    Rule(
        "while-padded",
        "transforms",
        {"loop": ("data-dependent",), "carry": ("varying",)},
        "A loop carry must keep one shape and dtype. Pad to the largest size, carry the "
        "length in use, and mask.",
        "lax.while_loop over a padded carry",
        (
            "def body(s): buf, n = s; return buf.at[n].set(buf[n - 1] * 2), n + 1",
            "buf, n = lax.while_loop(lambda s: (s[1] < s[0].size) & (s[0][s[1] - 1] < 100), "
            "body, (jnp.ones(16), 1))",
        ),
        ("a Python loop: its length is data-dependent, so it cannot be traced",),
        supersedes=("while-loop",),
    ),
    Rule(
        "while-loop",
        "transforms",
        {"loop": ("data-dependent",)},
        "A Python loop on a traced value fails (TracerBoolConversionError). lax.while_loop "
        "compiles the body once and runs on the device until the predicate fails. It is "
        "not reverse-differentiable: if you need jax.grad, answer gradients=yes.",
        "lax.while_loop",
        (
            "cond = lambda s: jnp.max(jnp.abs(s[0] - s[1])) > 1e-6",
            "x, _ = lax.while_loop(cond, lambda s: (step(s[0]), s[0]), (step(x0), x0))",
        ),
        ("host-side loops that call a jitted step (a device sync per iteration)",),
    ),
    Rule(
        "scan-padded",
        "transforms",
        {"loop": ("static",), "carry": ("varying",), "goal": ("compile-time",)},
        "An unrolled Python loop compiles every iteration separately. Pad the carry to its "
        "largest shape, carry the length in use, and scan: the body compiles once.",
        "lax.scan over a padded carry",
        (
            "def body(s, _): buf, n = s; return (buf.at[n].set(buf[n - 1] * 2), n + 1), None",
            "(buf, n), _ = lax.scan(body, (x0.at[0].set(1), 1), length=x0.shape[0] - 1)",
        ),
        supersedes=("python-loop-unrolled",),
    ),
    Rule(
        "scan",
        "transforms",
        {"loop": ("static",), "carry": ("fixed",), "outputs": ("every-step",)},
        "A fixed carry with per-step outputs is exactly scan: the body compiles once (a "
        "Python loop under jit unrolls, and compile time grows with the count) and the "
        "outputs come back stacked.",
        "lax.scan",
        (
            "def ema(c, x): c = 0.9 * c + 0.1 * x; return c, c",
            "final, history = lax.scan(ema, jnp.zeros_like(xs[0]), xs)",
        ),
        ("scan's unroll= argument trades compile time for run time on short bodies",),
    ),
    Rule(
        "fori-loop",
        "transforms",
        {"loop": ("static",), "carry": ("fixed",), "outputs": ("final",)},
        "Only the final state is needed. fori_loop with static bounds compiles the body "
        "once and, being a scan underneath, is reverse-differentiable.",
        "lax.fori_loop",
        (
            "x = lax.fori_loop(0, 100, lambda i, x: step(x), x0)",
            "# static bounds: lowered to a scan, so jax.grad works",
        ),
        ("a Python loop under jit for more than a few iterations (compile time)",),
    ),
    Rule(
        "cond",
        "transforms",
        {"branch": ("yes",), "batch": ("none",)},
        "A Python `if` on a traced value fails. lax.cond traces both branches and runs one; "
        "if both sides are cheap, jnp.where is simpler.",
        "lax.cond (lax.switch for n branches)",
        (
            "y = lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)  # one branch runs",
            "z = lax.switch(jnp.int32(1), [jnp.sin, jnp.cos, jnp.tanh], x)",
        ),
        ("branching on shapes or Python settings: that is ordinary Python at trace time",),
    ),
    Rule(
        "lax-map-memory",
        "transforms",
        {"goal": ("memory",), "batch": ("independent",)},
        "vmap materialises every example's intermediates at once. lax.map with batch_size "
        "runs vmapped chunks one after another and bounds peak memory.",
        "lax.map with batch_size",
        (
            "ys = lax.map(jnp.sort, xs, batch_size=16)  # vmap over 16 at a time",
            "# instead of jax.vmap(jnp.sort)(xs), which holds every example's buffers",
        ),
        ("jax.checkpoint, if the memory is autodiff residuals (answer autodiff)",),
        supersedes=("vmap",),
    ),
    # -- rung 3: memory and sharding ------------------------------------------
    Rule(
        "checkpoint-residuals",
        "memory-and-sharding",
        {"gradients": ("yes",), "autodiff": ("too-much-memory",)},
        "Reverse mode keeps the forward pass's residuals alive until the backward pass; "
        "jax.checkpoint recomputes them instead, trading FLOPs for memory.",
        "jax.checkpoint (with a policy)",
        (
            "block = jax.checkpoint(jnp.tanh, policy=jax.checkpoint_policies.nothing_saveable)",
            "g = jax.grad(lambda x: block(block(x)).sum())(x)",
        ),
        (
            "jax.ad_checkpoint.print_saved_residuals(f, x) to see what is stored",
            "a custom_vjp that saves less (rung 4) only if remat costs too much time",
        ),
    ),
    Rule(
        "shard-map",
        "memory-and-sharding",
        {"devices": ("explicit",)},
        "You need to say which collective runs where (a ring, an overlap, a per-shard "
        "algorithm): shard_map gives per-device code with explicit psum, all_gather and "
        "ppermute. The example's mesh has Auto axes; under jax.make_mesh's Explicit "
        "default, in_specs must match how the input is already sharded.",
        "jax.shard_map",
        (
            "mesh = jax.make_mesh((jax.device_count(),), ('x',), (jax.sharding.AxisType.Auto,))",
            "total = jax.shard_map(lambda a: lax.psum(a.sum(), 'x'), mesh=mesh, "
            "in_specs=jax.P('x'), out_specs=jax.P())(xs)",
        ),
        (
            "jit with shardings first: the compiler's collectives are often as good",
            "turning check_vma off: it catches values you forgot to reduce",
        ),
    ),
    Rule(
        "sharding",
        "memory-and-sharding",
        {"devices": ("compiler",)},
        "Put the data on a mesh and let XLA propagate shardings and insert collectives; "
        "the code stays single-device code.",
        "jax.jit with jax.NamedSharding inputs",
        (
            "mesh = jax.make_mesh((jax.device_count(),), ('x',))",
            "y = jax.jit(jnp.sin)(jax.device_put(xs, jax.NamedSharding(mesh, jax.P('x'))))",
        ),
        ("more devices for a problem small enough that communication dominates",),
    ),
    Rule(
        "distributed-simulated",
        "memory-and-sharding",
        {"goal": ("distributed",), "devices": ("single",)},
        "Distributed semantics matter but you answered a single device: write it with "
        "shardings and test on simulated CPU devices before renting a pod.",
        "jax.sharding on simulated CPU devices",
        (
            "jax.config.update('jax_num_cpu_devices', 8)  # before the first JAX operation",
            "# or XLA_FLAGS=--xla_force_host_platform_device_count=8 in the environment",
        ),
    ),
    Rule(
        "memory",
        "memory-and-sharding",
        {"goal": ("memory",), "batch": ("none", "coupled")},
        "Peak memory comes from buffers kept alive: donate the inputs you overwrite, and "
        "rematerialise activations instead of storing them.",
        "donate_argnums and jax.checkpoint",
        (
            "update = jax.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)  # reuse p's buffer",
            "block = jax.checkpoint(jnp.tanh)  # recompute in the backward pass",
        ),
        ("measure first: jax.jit(f).lower(x).compile().memory_analysis()",),
    ),
    # -- rung 4: custom derivatives ----------------------------------------------
    Rule(
        "custom-jvp",
        "custom-vjp",
        {"gradients": ("yes",), "autodiff": ("wrong", "unstable")},
        "The derivative of the formula is wrong or not finite where the function is well "
        "behaved (a norm at zero, a ratio of small numbers). A custom_jvp states the right "
        "derivative once and works in forward and reverse mode (custom_vjp refuses forward "
        "mode).",
        "jax.custom_jvp",
        (
            "safe_norm = jax.custom_jvp(lambda x: jnp.sqrt(jnp.sum(x * x)))",
            "safe_norm.defjvp(lambda p, t: (safe_norm(p[0]), jnp.vdot(p[0], t[0]) / "
            "jnp.maximum(safe_norm(p[0]), 1e-12)))",
        ),
        (
            "a stable forward formulation (logsumexp, log1p, the double-where trick), "
            "which often fixes the gradient with no rule",
        ),
        new_args="--set rule=jvp",
    ),
    Rule(
        "custom-vjp",
        "custom-vjp",
        {"gradients": ("yes",), "autodiff": ("too-slow",)},
        "Autodiff differentiates through how you computed the result (every iteration of a "
        "solver); a custom VJP uses the maths instead (implicit differentiation, an "
        "analytic backward) and saves only what the backward pass needs.",
        "jax.custom_vjp",
        (
            "f = jax.custom_vjp(jnp.tanh)",
            "f.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, g: (g * (1 - y * y),))",
        ),
        (
            "lax.custom_root / lax.custom_linear_solve, which already differentiate "
            "solvers implicitly",
            "jax.checkpoint, if the cost is memory rather than time",
        ),
    ),
    # -- rung 5: export --------------------------------------------------------------
    Rule(
        "export",
        "export",
        {"ship": ("serialize",)},
        "Another process, machine or runtime must run it without your Python code: "
        "jax.export writes versioned StableHLO with symbolic shapes.",
        "jax.export",
        (
            "spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape('b, 4'), jnp.float32)",
            "blob = jax.export.export(jax.jit(jnp.sin))(spec).serialize()",
        ),
        (
            "jax.jit(f).lower(...).compile() and the persistent compilation cache, if you "
            "only need to skip compilation",
            "artifacts load on JAX versions up to about six months newer: plan re-exports",
        ),
    ),
    # -- rung 6: custom partitioning ---------------------------------------------------
    Rule(
        "custom-partitioning",
        "custom-partitioning",
        {"devices": ("compiler",), "gather": ("yes",)},
        "The partitioner cannot see inside this op and replicates it (an all-gather in the "
        "HLO), and a fixed shard_map would not survive the shardings its callers choose: "
        "custom_partitioning gives the op a Shardy sharding rule and a per-shard body.",
        "jax.experimental.custom_partitioning.custom_partitioning",
        (
            "op = custom_partitioning(impl)",
            "op.def_partition(partition=partition, sharding_rule='b n -> b n')",
        ),
        (
            "the all-gather itself: read the compiled HLO (JAX 0.12 already partitions "
            "e.g. a row-sharded FFT)",
            "a shard_map around the region, when its shardings are fixed",
        ),
    ),
    # -- rung 7: Pallas -------------------------------------------------------------
    Rule(
        "pallas-port-for-tpu",
        "pallas",
        {"library": ("hot-path",), "backend": ("tpu",)},
        "The library cannot run on TPU (the XLA FFI has no TPU route): port its hot kernel "
        "to jnp first, then to Pallas if a profile says so.",
        "jax.experimental.pallas.pallas_call",
        (
            "def kernel(x_ref, o_ref): o_ref[...] = x_ref[...] * 2",
            "y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "interpret=True)(x)",
        ),
        ("a jnp port: it may already be fast enough, and it is the oracle",),
    ),
    Rule(
        "pallas",
        "pallas",
        {"hotspot": ("measured",)},
        "A profile shows an op that XLA fuses or tiles badly (attention, a fused "
        "epilogue, ragged blocks); Pallas lets you choose the tiling and the memory "
        "traffic.",
        "jax.experimental.pallas.pallas_call",
        (
            "def kernel(x_ref, o_ref): o_ref[...] = x_ref[...] * 2",
            "y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "interpret=True)(x)",
        ),
        (
            "a different formulation, dtype or layout (read the optimised HLO)",
            "existing kernels: jax.nn.dot_product_attention(implementation='cudnn'), "
            "jax.experimental.pallas.ops",
        ),
    ),
    # -- rung 8: FFI ---------------------------------------------------------------------
    Rule(
        "ffi-cpu-kernel",
        "ffi",
        {"hotspot": ("measured",), "backend": ("cpu",)},
        "Pallas has no CPU compiler (interpret mode only), so on CPU a hand-written kernel "
        "is a C++ handler behind the XLA FFI.",
        "jax.ffi.ffi_call",
        (
            "jax.ffi.register_ffi_target('my_op', my_ext.handler(), platform='cpu')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        (
            "a naive C++ loop: it is easily slower than XLA (a single-threaded RMSNorm "
            "took 74-86 ms against 33 ms for jitted jnp on 4096x4096)",
        ),
        supersedes=("pallas",),
    ),
    Rule(
        "ffi-cuda",
        "ffi",
        {"library": ("hot-path",), "backend": ("gpu",)},
        "A tuned CUDA implementation exists and sits on the hot path: an FFI handler "
        "launches it on XLA's stream inside the compiled program, with no host round trip.",
        "jax.ffi.ffi_call with a CUDA handler",
        (
            "jax.ffi.register_ffi_target('my_op', my_ext.cuda_handler(), platform='CUDA')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        (
            "a jnp port or a Pallas (Mosaic GPU) kernel if the library is small",
            "the costs: nvcc and a CUDA build per CUDA major version in your packaging",
        ),
        new_args="--set cuda=yes",
    ),
    Rule(
        "ffi",
        "ffi",
        {"library": ("hot-path",), "backend": ("any", "cpu", "gpu")},
        "A tuned C++/CUDA implementation exists and sits on the hot path: the XLA FFI calls "
        "it inside the compiled program, with no host round trip and no Python.",
        "jax.ffi.ffi_call",
        (
            "jax.ffi.register_ffi_target('my_op', my_ext.handler(), platform='cpu')",
            "y = jax.ffi.ffi_call('my_op', jax.ShapeDtypeStruct(x.shape, x.dtype), "
            "vmap_method='sequential')(x)",
        ),
        (
            "a jnp port (keeps autodiff, vmap, sharding and every backend) if it is small",
            "jax.pure_callback, if a profile shows it is not on the hot path after all",
            "the costs: no TPU route, and a C++ build in your packaging (wheels per platform)",
        ),
    ),
    # -- rung 9: internals -------------------------------------------------------------------
    Rule(
        "new-primitive",
        "internals",
        {"internals": ("new-primitive",)},
        "Only a primitive carries its own abstract evaluation, JVP/transpose, batching and "
        "lowering rules. jax.extend has no compatibility guarantee: pin the JAX minor "
        "version.",
        "jax.extend.core.Primitive with jax.interpreters.{ad, batching, mlir}",
        (
            "from jax.extend.core import Primitive; p = Primitive('my_op'); p.def_impl(jnp.sin)",
            "p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))",
        ),
        (
            "custom_jvp/custom_vjp (a derivative), jax.custom_batching.custom_vmap (a "
            "batching rule), custom_partitioning (a sharding rule), jax.ffi (a foreign kernel)",
        ),
    ),
    Rule(
        "change-jax",
        "internals",
        {"internals": ("change-jax",)},
        "You need behaviour JAX does not have: find where the concept lives, change it "
        "with the upstream tests beside it, and send it upstream.",
        "jax-ladder locate, then JAX's own tests",
        (
            "jax-ladder locate while_loop --repo ~/src/jax",
            "python -m pytest ~/src/jax/tests/lax_control_flow_test.py -k while",
        ),
        (
            "a minimal reproducer filed upstream first: a fork is yours to maintain",
            "a workaround at a lower rung (a custom rule, a flag)",
        ),
    ),
)

NOTES: tuple[Note, ...] = (
    Note(
        "kernel-gradients",
        {"gradients": ("yes",)},
        ("custom-partitioning", "pallas", "ffi"),
        "It has no autodiff rule of its own: wrap it in jax.custom_vjp whose forward and "
        "backward call it (the kit's templates do this).",
    ),
    Note(
        "export-gradients",
        {"gradients": ("yes",)},
        ("export",),
        "Serialize with vjp_order=1 to differentiate the deserialized function; without it "
        "grad raises 'No VJP is available'.",
    ),
    Note(
        "ffi-vmap",
        {"batch": ("independent",)},
        ("ffi",),
        "ffi_call refuses vmap unless you pass vmap_method ('sequential', "
        "'sequential_unrolled', 'expand_dims', 'broadcast_all').",
    ),
    Note(
        "ffi-sharding",
        {"devices": ("compiler", "explicit")},
        ("ffi",),
        "Under sharding an FFI call is replicated unless its target is registered with "
        "jax.ffi.register_ffi_target_as_batch_partitionable, or it runs inside shard_map.",
    ),
    Note(
        "pallas-gpu",
        {"backend": ("gpu", "any")},
        ("pallas",),
        "On GPU, write Mosaic GPU kernels (Hopper, sm_90a); the Pallas Triton backend is "
        "deprecated and warns when lowering on JAX 0.12.",
    ),
    Note(
        "per-backend",
        {"backend": ("any",)},
        ("pallas", "ffi"),
        "Kernels are per backend: keep the plain-JAX version as the fallback on the others "
        "and as the test oracle.",
    ),
    Note(
        "explicit-mesh",
        {"devices": ("compiler",)},
        ("memory-and-sharding", "custom-partitioning"),
        "jax.make_mesh makes Explicit axes by default on JAX 0.12; pass "
        "axis_types=(jax.sharding.AxisType.Auto,) * ndim for compiler-decided propagation "
        "(custom_partitioning ops fail at run time under an Explicit mesh).",
    ),
)


# -- answers ---------------------------------------------------------------------


def applies(question: Question, answers: Mapping[str, str]) -> bool:
    return all(answers.get(k) in v for k, v in question.only_if.items())


def parse_answer(question: Question, text: str) -> str:
    return check_choice(question.key, text.strip(), question.choices)


def parse_answer_flags(items: Iterable[str]) -> dict[str, str]:
    """["key=value", ...] from --answer, validated."""
    given: dict[str, str] = {}
    for item in items:
        key, value = split_assignment(item, "--answer")
        question = QUESTION[_known_key(key.strip())]
        given[question.key] = parse_answer(question, value)
    return given


def _known_key(key: str) -> str:
    if key not in QUESTION:
        raise UsageError(f"unknown question {key!r}; the questions are: {', '.join(QUESTION)}")
    return key


def load_answers_file(path: Path) -> dict[str, str]:
    """A flat mapping of question keys to answers, in JSON or TOML."""
    try:
        text = path.read_text()
    except OSError as err:
        raise UsageError(f"cannot read answers file {str(path)!r}: {err.strerror}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:  # guess: JSON first, then TOML
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        first = str(err).splitlines()[0]
        raise UsageError(f"answers file {str(path)!r} is not valid JSON or TOML: {first}") from None
    if not isinstance(data, dict):
        raise UsageError(f"answers file {str(path)!r} must hold a mapping of question: answer")
    given = {}
    for key, value in data.items():
        question = QUESTION[_known_key(str(key))]
        if isinstance(value, bool) and set(question.choices) >= {"yes", "no"}:
            value = "yes" if value else "no"
        if not isinstance(value, str):
            raise UsageError(f"{key} in {str(path)!r} must be a string, got {value!r}")
        given[key] = parse_answer(question, value)
    return given


Ask = Callable[[Question], str]


def resolve_answers(given: Mapping[str, str], ask: Ask | None = None) -> dict[str, str]:
    """Every question answered: given, else asked (`ask`), else its default.

    A question that does not apply (its `only_if` fails) takes its default; an
    explicit other answer to it is a contradiction and a UsageError.
    """
    unknown = [k for k in given if k not in QUESTION]
    if unknown:
        _known_key(unknown[0])
    answers: dict[str, str] = {}
    for q in QUESTIONS:
        relevant = applies(q, answers)
        if q.key in given:
            value = parse_answer(q, given[q.key])
            if not relevant and value != q.default:
                why = ", ".join(f"{k}={answers[k]}" for k in q.only_if)
                raise UsageError(
                    f"{q.key}={value} does not apply when {why}; drop it or change {why}"
                )
            answers[q.key] = value
        elif relevant and ask is not None:
            answers[q.key] = ask(q)
        else:
            answers[q.key] = q.default
    return answers


# -- the decision ------------------------------------------------------------------


def _step(rung_name: str) -> int:
    rung = by_name(rung_name)
    assert rung is not None, rung_name
    return rung.step


@dataclass(frozen=True)
class Recommendation:
    rung: Rung
    rule: Rule
    also: tuple[Rule, ...]  # other matching rules: mechanisms to use inside it
    notes: tuple[Note, ...]
    answers: Mapping[str, str]

    @property
    def new_command(self) -> str | None:
        if not self.rung.template:
            return None
        return " ".join(filter(None, ["jax-ladder new", self.rung.name, self.rule.new_args]))

    @property
    def page(self) -> str:
        return page_path(self.rung)

    def to_json(self) -> dict:
        return {
            "rung": {"step": self.rung.step, "name": self.rung.name},
            "rule": self.rule.id,
            "why": self.rule.why,
            "use": self.rule.use,
            "example": list(self.rule.example),
            "rule_out": list(self.rule.rule_out),
            "new_command": self.new_command,
            "instead": None if self.rung.template else self.rung.instead,
            "also": [{"rule": r.id, "rung": r.rung, "use": r.use, "why": r.why} for r in self.also],
            "notes": [n.text for n in self.notes],
            "reference": self.page,
            "answers": dict(self.answers),
        }


def page_path(rung: Rung) -> str:
    """The rung's reference page, relative to the repository root."""
    return f"docs/rungs/{rung.step}-{rung.name}.md"


def choose(answers: Mapping[str, str], rules: Sequence[Rule] = RULES) -> Rule | None:
    """The recommended rule: the highest rung among the matches, earliest in the table."""
    best: Rule | None = None
    for rule in rules:
        if rule.matches(answers) and (best is None or _step(rule.rung) > _step(best.rung)):
            best = rule
    return best


def recommend(answers: Mapping[str, str]) -> Recommendation:
    rule = choose(answers)
    assert rule is not None, "the fallback rule matches everything"
    rung = by_name(rule.rung)
    assert rung is not None
    also, seen, replaced = [], {rule.use}, set(rule.supersedes)
    for other in sorted(RULES, key=lambda r: -_step(r.rung)):
        if (
            other.when
            and other.matches(answers)
            and other.use not in seen
            and other.id not in replaced
        ):
            also.append(other)
            seen.add(other.use)
            replaced.update(other.supersedes)
    notes = tuple(n for n in NOTES if n.applies(answers, rung.name))
    return Recommendation(rung, rule, tuple(also), notes, dict(answers))


def render(rec: Recommendation, page_root: Path | None = None) -> str:
    r = rec.rung
    lines = [f"Recommended rung: {r.step}. {r.name} ({r.summary})", ""]
    lines += ["Why:", *_wrap(rec.rule.why, "  ")]
    lines += ["", f"Use: {rec.rule.use}", *(f"    {line}" for line in rec.rule.example)]
    if rec.rule.rule_out:
        lines += ["", "Rule out first:"]
        for item in rec.rule.rule_out:
            lines += _wrap(item, "  - ", "    ")
    if rec.also:
        lines += ["", "Also, inside it:"]
        lines += [f"  - {o.use} (rung {_step(o.rung)}, {o.rung})" for o in rec.also]
    if rec.notes:
        lines += ["", "Notes:"]
        for note in rec.notes:
            lines += _wrap(note.text, "  - ", "    ")
    lines.append("")
    if rec.new_command:
        lines.append(f"Scaffold: {rec.new_command}")
    else:
        lines.append(f"Scaffold: the kit has no template for this rung; use {r.instead}")
    if page_root is not None and (page_root / rec.page).is_file():
        lines.append(f"Reference: {page_root / rec.page}")
    else:
        lines.append(f"Reference: {rec.page} in the jax-ladder repository")
    chosen = ", ".join(f"{k}={v}" for k, v in rec.answers.items() if v != QUESTION[k].default)
    lines.append(f"Answers: {chosen or 'all defaults'}")
    return "\n".join(lines)


def _wrap(text: str, first: str, rest: str | None = None, width: int = 88) -> list[str]:
    rest = first if rest is None else rest
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest) or [first]


# -- consistency of the table ----------------------------------------------------------


def solve(must: Iterable[Rule | Note], must_not: Iterable[Rule] = ()) -> dict[str, str] | None:
    """Answers (respecting `only_if`) that match everything in `must` and no rule in
    `must_not`, or None when there are none.

    A depth-first search over the questions in order. It prunes as soon as a
    `must_not` rule is matched, counting answers that `must` already forces.
    """
    must_not = list(must_not)
    need: dict[str, set[str]] = {}
    for item in must:
        for key, values in item.when.items():
            need[key] = need.get(key, set(QUESTION[key].choices)) & set(values)

    def matched(rule: Rule, answers: dict[str, str]) -> bool:
        return all(
            answers[k] in v if k in answers else (k in need and need[k] <= set(v))
            for k, v in rule.when.items()
        )

    def search(i: int, answers: dict[str, str]) -> dict[str, str] | None:
        if any(matched(r, answers) for r in must_not):
            return None
        if i == len(QUESTIONS):
            return dict(answers)
        q = QUESTIONS[i]
        options = q.choices if applies(q, answers) else (q.default,)
        for value in options:
            if q.key in need and value not in need[q.key]:
                continue
            answers[q.key] = value
            found = search(i + 1, answers)
            del answers[q.key]
            if found is not None:
                return found
        return None

    return search(0, {})


def beaten_by(rule: Rule, rules: Sequence[Rule] = RULES) -> list[Rule]:
    """The rules that win over `rule` whenever both match."""
    index, step = rules.index(rule), _step(rule.rung)
    return [
        r
        for i, r in enumerate(rules)
        if _step(r.rung) > step or (_step(r.rung) == step and i < index)
    ]


def witness(rule: Rule, rules: Sequence[Rule] = RULES) -> dict[str, str] | None:
    """Answers for which `rule` is the recommendation; None if it is unreachable."""
    return solve([rule], beaten_by(rule, rules))


def note_witness(note: Note, rules: Sequence[Rule] = RULES) -> dict[str, str] | None:
    """Answers for which `note` is printed; None if it never is."""
    for rule in rules:
        if rule.rung in note.rungs:
            found = solve([rule, note], beaten_by(rule, rules))
            if found is not None:
                return found
    return None


def _shadow(rule: Rule, rules: Sequence[Rule]) -> str:
    """Why `rule` never wins: the rules that match whenever it does, if any."""
    beaten = beaten_by(rule, rules)
    covering = [
        r.id
        for r in beaten
        if all(key in rule.when and set(rule.when[key]) <= set(v) for key, v in r.when.items())
    ]
    if covering:
        return f"{', '.join(covering)} always win(s) over it"
    return "rules of higher rank cover all its answers together"


def check_table(
    questions: Sequence[Question] = QUESTIONS,
    rules: Sequence[Rule] = RULES,
    notes: Sequence[Note] = NOTES,
) -> list[str]:
    """Every problem with the questions, rules and notes; empty when consistent.

    (The reachability checks search over the module's QUESTIONS.)
    """
    problems: list[str] = []
    keys = [q.key for q in questions]
    known = {q.key: q for q in questions}
    if len(set(keys)) != len(keys):
        problems.append("duplicate question keys")
    for i, q in enumerate(questions):
        if len(q.choices) < 2 or len(set(q.choices)) != len(q.choices):
            problems.append(f"question {q.key}: needs two or more distinct choices")
        for key, values in q.only_if.items():
            if key not in keys[:i]:
                problems.append(f"question {q.key}: only_if on {key}, not an earlier question")
            elif not set(values) <= set(known[key].choices):
                problems.append(f"question {q.key}: only_if {key} has unknown answers")
    names = [r.name for r in LADDER]
    ids = {r.id for r in rules}
    if len(ids) != len(rules):
        problems.append("duplicate rule ids")
    for rule in rules:
        problems += [
            f"rule {rule.id}: supersedes unknown rule {x!r}"
            for x in rule.supersedes
            if x not in ids
        ]
    for item in (*rules, *notes):
        kind = "rule" if isinstance(item, Rule) else "note"
        for rung in [item.rung] if isinstance(item, Rule) else list(item.rungs):
            if rung not in names:
                problems.append(f"{kind} {item.id}: unknown rung {rung!r}")
        for key, values in item.when.items():
            if key not in known:
                problems.append(f"{kind} {item.id}: unknown question {key!r}")
            elif not values or not set(values) <= set(known[key].choices):
                problems.append(f"{kind} {item.id}: bad answers {values!r} for {key}")
    if problems:
        return problems
    steps = [_step(r.rung) for r in rules]
    if steps != sorted(steps):
        problems.append("rules are not listed lowest rung first")
    if [r.rung for r in rules if not r.when] != ["plain-jax"]:
        problems.append("there must be exactly one fallback rule (no conditions), at plain-jax")
    for rule in rules:
        if len(rule.example) != 2:
            problems.append(f"rule {rule.id}: the example must be two lines")
        if witness(rule, rules) is None:
            problems.append(f"rule {rule.id} is unreachable ({_shadow(rule, rules)})")
    for note in notes:
        if note_witness(note, rules) is None:
            problems.append(f"note {note.id} can never be printed")
    reached = {r.rung for r in rules}
    problems += [f"no rule recommends rung {name}" for name in names if name not in reached]
    return problems
