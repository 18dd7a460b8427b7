"""The recommend table: the questions, the rules and the notes, all data.

Each rule names the *lowest* rung that meets one need stated in the answers (a
data-dependent loop needs `lax.while_loop`, rung 2; a serialized artifact needs
`jax.export`, rung 5). Rules are listed lowest rung first, the low rungs' in
`rules_low.py` and the rest in `rules_high.py`; within a rung the more
specific rule comes first and wins ties. With no need at all, the fallback rule
(the one without conditions) says plain JAX. Notes are caveats for a
recommended rung. `check.check_table()` proves the table consistent.
"""

from __future__ import annotations

from jax_ladder.recommend.records import Conditions, Note, Question, Rule
from jax_ladder.recommend.rules_high import RULES_HIGH
from jax_ladder.recommend.rules_low import RULES_LOW

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

RULES: tuple[Rule, ...] = (*RULES_LOW, *RULES_HIGH)

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
