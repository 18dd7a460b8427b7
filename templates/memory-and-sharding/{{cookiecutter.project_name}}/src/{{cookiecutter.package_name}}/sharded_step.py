{%- set op = cookiecutter.op_name -%}
"""A training step whose memory and communication are chosen by hand, built
from the block declared in {{ op }}.py (and its reference in reference.py).

The model is a stack of residual blocks, ``h <- h + block(h, *weights)``, with a
squared-error loss. `reference_loss` and `reference_step` are that model on
one device, the correctness oracle. The sharded step is written with
`jax.shard_map`, so every collective in the compiled program is one written
here:

- the batch is split over the "data" mesh axis;
- every weight is stored sharded over "data" as well, along the axis SPLIT
  puts there (FSDP: each device holds 1/n of every weight), and gathered
  whole with `jax.lax.all_gather` just before its block uses it. An
  optimization barrier makes each block's gather wait for the previous
  block's output, so the forward holds one block's gathered weights at a time
  (left to itself, XLA:CPU gathers every block's weights before the first
  block runs; under JAX 0.10 its XLA:CPU drops the barrier and does so);
- the backward of that all-gather is its transpose, a reduce-scatter: each
  device receives the sum over the batch shards of the gradient of its own
  slice of the weight, ready for a local update;
{%- if cookiecutter.parallelism == "fsdp-tp" %}
- tensor parallelism (Megatron-style) over a second mesh axis, "model":
  each weight's axes that SPLIT puts on "model" are split there, so each
  device computes a slice of the hidden layer and a partial sum of the
  block's output, which one `jax.lax.psum` over "model" completes (the
  backward needs one more, for the gradient of the block's input);
{%- endif %}
- `jax.checkpoint` around each block (no effect on JAX 0.10's XLA:CPU,
  which merges the recomputation with the forward), with a policy that
  decides what the backward keeps:
{%- if cookiecutter.remat == "save-gathered" %}
  the gathered weights (named with `checkpoint_name`) and nothing else. The
  activations are recomputed; the weights are not gathered a second time,
  so between the forward and the backward every block's gathered weights
  are live at once.
{%- else %}
  nothing. The backward gathers each weight again and recomputes the
  block: the least memory (one block's gathered weights at a time, in the
  backward too), at the price of a second all-gather per weight.
{%- endif %}
- `train_step` donates the parameters and the optimizer state, so XLA writes
  the new values into the old buffers.

The mesh has Explicit axes (the default of `jax.make_mesh`): shardings are
part of the arrays' types, and `jax.sharding.reshard` moves an array to the
sharding shard_map expects.
"""

from functools import partial
from typing import TypeAlias

import jax
import jax.numpy as jnp
from jax import P
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding

{% if op < "reference" -%}
from .{{ op }} import SPLIT, WEIGHTS, {{ op }}
from .reference import reference_{{ op }}
{%- else -%}
from .reference import reference_{{ op }}
from .{{ op }} import SPLIT, WEIGHTS, {{ op }}
{%- endif %}

# One tuple of weights per residual block, in the order of WEIGHTS.
Params: TypeAlias = list[tuple[jax.Array, ...]]

DATA = "data"  # mesh axis of the batch and of the FSDP weight shards
TENSOR_PARALLEL = {{ "True" if cookiecutter.parallelism == "fsdp-tp" else "False" }}
MODEL = "model"  # mesh axis of the tensor-parallel split (fsdp-tp only)
MESH_AXES = (DATA, MODEL) if TENSOR_PARALLEL else (DATA,)
REMAT = "{{ cookiecutter.remat }}"  # the policy train_step uses (see POLICIES)
GATHERED = "gathered_weight"  # checkpoint_name of a weight after its all-gather

# What jax.checkpoint may keep for the backward of a block.
POLICIES = {
    # Only the gathered weights: recompute the block's activations, not the gather.
    "save-gathered": jax.checkpoint_policies.save_only_these_names(GATHERED),
    # Nothing: the backward gathers every weight again.
    "regather": jax.checkpoint_policies.nothing_saveable,
}


def _spec(name: str, axes: tuple[str, ...]) -> P:
    """How a weight is stored: each named axis on the mesh axis SPLIT gives it,
    if this mesh has that axis."""
    mesh_axes = [SPLIT.get(a) for a in axes]
    unknown = {m for m in mesh_axes if m is not None} - {DATA, MODEL}
    if unknown:
        raise ValueError(f"SPLIT names {sorted(unknown)}: the mesh axes are {DATA!r}, {MODEL!r}")
    kept = [m if m in MESH_AXES else None for m in mesh_axes]
    for m in MESH_AXES:
        if kept.count(m) > 1:
            raise ValueError(f"{name} {axes}: SPLIT puts two of its axes on mesh axis {m!r}")
    return P(*kept)


# Each weight's storage, and the dimension its all-gather makes whole (None:
# not split over data, nothing to gather).
SPECS = tuple(_spec(name, axes) for name, axes in WEIGHTS.items())
GATHER_AXES = tuple(tuple(s).index(DATA) if DATA in tuple(s) else None for s in SPECS)
BATCH_SPEC = P(DATA, None)


def reference_loss(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Half the mean over the batch of the squared error of the residual
    model ``h <- h + reference_{{ op }}(h, *weights)``, applied block by block
    to x (batch, d): one device, no shard_map."""
    h = x
    for weights in params:
        h = h + reference_{{ op }}(h, *weights)
    return 0.5 * jnp.sum((h - y) ** 2) / x.shape[0]


def reference_step(
    params: Params,
    momentum: Params,
    x: jax.Array,
    y: jax.Array,
    learning_rate: float = 0.05,
    beta: float = 0.9,
) -> tuple[Params, Params, jax.Array]:
    """One SGD-with-momentum step of reference_loss: m <- beta m + g,
    p <- p - learning_rate m. Returns (params, momentum, loss before the step)."""
    value, grads = jax.value_and_grad(reference_loss)(params, x, y)
    momentum = jax.tree.map(lambda v, g: beta * v + g, momentum, grads)
    params = jax.tree.map(lambda w, v: w - learning_rate * v, params, momentum)
    return params, momentum, value


def make_mesh(
    devices: list[jax.Device] | None = None, axis_type: AxisType = AxisType.Explicit
) -> Mesh:
    """A mesh with `axis_type` axes over `devices` (default: all of them):
    ("data",){% if cookiecutter.parallelism == "fsdp-tp" %}, or ("data", "model") with 2 devices on "model" when
    their number is even (1 otherwise){% endif %}."""
    devices = list(jax.devices() if devices is None else devices)
    if TENSOR_PARALLEL:
        model = 2 if len(devices) % 2 == 0 else 1
        shape: tuple[int, ...] = (len(devices) // model, model)
    else:
        shape = (len(devices),)
    return jax.make_mesh(shape, MESH_AXES, axis_types=(axis_type,) * len(shape), devices=devices)


def shard_params(params: Params) -> Params:
    """Place each block's weights on the current mesh (`jax.set_mesh`) as the
    step stores them (SPECS)."""
    return [
        tuple(jax.sharding.reshard(w, spec) for w, spec in zip(weights, SPECS, strict=True))
        for weights in params
    ]


def shard_batch(a: jax.Array) -> jax.Array:
    """Place inputs or targets (batch, d) on the current mesh, rows over data."""
    placed: jax.Array = jax.sharding.reshard(a, BATCH_SPEC)
    return placed


def loss(
    params: Params,
    x: jax.Array,
    y: jax.Array,
    remat: str | None = REMAT,
    mesh: Mesh | None = None,
) -> jax.Array:
    """The loss of reference_loss, computed shard by shard on `mesh` (default:
    the current mesh, `jax.set_mesh`).

    With Explicit axes (make_mesh's default), shardings are part of the
    arrays' types: the arguments must be unsharded or on `mesh` (shard_params,
    shard_batch), and the call belongs inside `jax.set_mesh(mesh)`, without
    which an eager `jax.grad` fails on the mesh-typed result. With Auto axes
    (`make_mesh(devices, AxisType.Auto)`), the loss is a plain function of
    arrays: it runs without `jax.set_mesh`, on arrays placed anyhow, under
    any transformation (tests/op_spec.py runs it so).

    `remat` names the checkpoint policy of each block (a key of POLICIES), or
    None for no checkpointing. Raises ValueError for shapes that do not fit
    each other or the mesh.
    """
    on: Mesh | AbstractMesh = jax.sharding.get_abstract_mesh() if mesh is None else mesh
    _check(on, params, x, y)
    specs = [SPECS] * len(params)
    # Under Explicit axes an array's sharding is part of its type, and
    # shard_map requires exactly its in_specs: reshard is a no-op for arrays
    # already placed (shard_params, shard_batch) and slices replicated ones.
    params = [
        tuple(_reshard(w, on, spec) for w, spec in zip(weights, SPECS, strict=True))
        for weights in params
    ]
    x, y = _reshard(x, on, BATCH_SPEC), _reshard(y, on, BATCH_SPEC)
    per_shard = partial(_local_loss, remat=remat, batch=x.shape[0])
    sharded = jax.shard_map(
        per_shard, mesh=on, in_specs=(specs, BATCH_SPEC, BATCH_SPEC), out_specs=P()
    )
    value: jax.Array = sharded(params, x, y)
    return value


@partial(jax.jit, donate_argnums=(0, 1), static_argnames=("remat",))
def train_step(
    params: Params,
    momentum: Params,
    x: jax.Array,
    y: jax.Array,
    learning_rate: float = 0.05,
    beta: float = 0.9,
    remat: str | None = REMAT,
) -> tuple[Params, Params, jax.Array]:
    """One SGD-with-momentum step of the sharded loss, as reference_step:
    m <- beta m + g, p <- p - learning_rate m. Returns (params, momentum,
    loss before the step). `remat` is the loss's checkpoint policy (default:
    the configured one; benchmarks/bench.py compares them all).

    `params` and `momentum` are donated: their buffers hold the results, and
    the arrays passed in are deleted. Call it inside `jax.set_mesh(mesh)` so
    that the step knows its mesh.
    """
    value, grads = jax.value_and_grad(partial(loss, remat=remat))(params, x, y)
    # Elementwise on arrays sharded alike: no communication.
    momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - learning_rate * m, params, momentum)
    return params, momentum, value


def _reshard(a: jax.Array, mesh: Mesh | AbstractMesh, spec: P) -> jax.Array:
    if not mesh.are_all_axes_explicit:
        return a  # Auto axes: shardings are not types, and shard_map moves `a` itself
    placed: jax.Array = jax.sharding.reshard(a, NamedSharding(mesh, spec))
    return placed


def _local_loss(
    params: Params, x: jax.Array, y: jax.Array, remat: str | None, batch: int
) -> jax.Array:
    """One device's share: its rows of the batch, its shards of the weights."""
    block = _block if remat is None else jax.checkpoint(_block, policy=POLICIES[remat])
    h = x
    for weights in params:
        h = block(h, *weights)
    # Sum of this shard's squared errors, summed over the data shards.
    total: jax.Array = jax.lax.psum(0.5 * jnp.sum((h - y) ** 2), DATA)
    return total / batch


def _block(h: jax.Array, *weights: jax.Array) -> jax.Array:
    # Nothing in the data flow stops XLA from gathering every block's weights
    # at the start of the step (XLA:CPU does: all of them live at once). The
    # barrier makes this block's weight shards available only together with
    # h, the previous block's output, so each gather waits for that block and
    # its gathered weights are the only ones alive. The price: a gather cannot
    # overlap the previous block's compute. The barrier's copy of h is left
    # unused: JAX 0.10 gives every operand of a barrier in a shard_map the
    # union of their varying mesh axes, which with tensor parallelism would
    # make h vary over "model" and the loss no longer replicated (0.11 and
    # 0.12 keep each operand's own).
    _, *shards = jax.lax.optimization_barrier((h, *weights))
    # The FSDP gather: each whole weight (or its model slice), for this block
    # only. Its transpose, in the backward, is a reduce-scatter over data.
    gathered = [
        w if axis is None else jax.lax.all_gather(w, DATA, axis=axis, tiled=True)
        for w, axis in zip(shards, GATHER_AXES, strict=True)
    ]
    gathered = [checkpoint_name(w, GATHERED) for w in gathered]
    out = {{ op }}(h, *gathered)
    if TENSOR_PARALLEL:
        out = jax.lax.psum(out, MODEL)  # sum the model shards' partial products
    return h + out


def _check(mesh: Mesh | AbstractMesh, params: Params, x: jax.Array, y: jax.Array) -> None:
    if tuple(mesh.axis_names) != MESH_AXES:
        raise ValueError(
            f"call inside jax.set_mesh(make_mesh()) or pass mesh=make_mesh(): the step needs "
            f"a mesh with axes {MESH_AXES}, got {tuple(mesh.axis_names) or 'no mesh'}"
        )
    # An array typed with another mesh's Explicit axes cannot move to this
    # mesh inside jit (shard_map would fail deep inside): say so here.
    own = mesh.abstract_mesh if isinstance(mesh, Mesh) else mesh
    for a in jax.tree.leaves((params, x, y)):
        other = jax.typeof(a).sharding.mesh
        if other.explicit_axes and other != own:
            raise ValueError(
                f"an argument is sharded over Explicit axes {other.explicit_axes} of another "
                f"mesh: put it on the step's mesh {own.axis_names} first (shard_params, "
                "shard_batch, or jax.device_put outside jit)"
            )
    if not all(isinstance(n, int) for a in jax.tree.leaves((params, x, y)) for n in a.shape):
        # Measured on XLA:CPU, JAX 0.12: an exported loss with a symbolic
        # batch crashes the process when called.
        raise ValueError(
            "the step needs concrete shapes: a symbolic dimension (jax.export shape "
            "polymorphism) through its shard_map crashes XLA when called; export one "
            "artifact per shape"
        )
    data = mesh.shape[DATA]
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(f"x and y must both be (batch, d), got {x.shape} and {y.shape}")
    if x.shape[0] % data:
        raise ValueError(
            f"batch {x.shape[0]} is not divisible by the {data} devices of mesh axis {DATA!r}"
        )
    if not params:
        raise ValueError(f"params is empty: give at least one block of weights {tuple(WEIGHTS)}")
    for i, weights in enumerate(params):
        if len(weights) != len(WEIGHTS):
            raise ValueError(
                f"block {i}: give its {len(WEIGHTS)} weights {tuple(WEIGHTS)}, got {len(weights)}"
            )
        sizes = {"d": x.shape[1]}  # d: x's features; the others, as the first weight has them
        for (name, axes), w, spec in zip(WEIGHTS.items(), weights, SPECS, strict=True):
            if w.ndim != len(axes) or any(
                sizes.setdefault(a, n) != n for a, n in zip(axes, w.shape, strict=True)
            ):
                bound = ", ".join(f"{a} = {n}" for a, n in sizes.items())
                raise ValueError(
                    f"block {i}: {name} must be ({', '.join(axes)}) with {bound}, got {w.shape}"
                )
            for size, axis in zip(w.shape, spec, strict=True):
                if axis is not None and size % mesh.shape[axis]:
                    raise ValueError(
                        f"block {i}: {name} {w.shape} is split as {spec}, but {size} is not "
                        f"divisible by the {mesh.shape[axis]} devices of mesh axis {axis!r}"
                    )
