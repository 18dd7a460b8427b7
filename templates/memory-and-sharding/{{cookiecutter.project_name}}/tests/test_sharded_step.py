"""The sharded step against the plain-JAX reference on 8 simulated CPU
devices and on one, and the compiled program read back: which collectives,
how much temporary memory, which buffers are reused."""

import re
from collections import Counter
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import (
    loss,
    make_mesh,
    reference_loss,
    reference_step,
    shard_batch,
    shard_params,
    train_step,
)
from {{ cookiecutter.package_name }}.hlo import collectives
from {{ cookiecutter.package_name }}.sharded_step import (
    DATA,
    GATHER_AXES,
    MODEL,
    POLICIES,
    REMAT,
    SPECS,
    TENSOR_PARALLEL,
)

from compare import assert_close
from devices import mesh_devices
from op_spec import GRADIENTS, STEPS, VALUES
from oracle import make_problem, step_f64

LAYERS = 3  # the first block, whose input needs no gradient, and two more
DEVICE_COUNTS = [8, 1]

# JAX 0.10's XLA:CPU (jaxlib 0.10.2, measured) drops optimization barriers
# before it schedules and simplifies: the barriers are in the lowered
# program, yet it gathers every block's weights before the first block runs,
# and it merges jax.checkpoint's recomputation with the forward (which the
# barriers jax.checkpoint adds should prevent), so the policies change
# neither the memory nor the gathers. JAX 0.11 and 0.12 keep the barriers.
# Strict: these tests fail the day that JAX 0.10 on CPU keeps them.
DROPS_BARRIERS = jax.__version_info__ < (0, 11) and mesh_devices(8)[0].platform == "cpu"


def barriers_dropped(applies: bool = True):
    """An expected failure where DROPS_BARRIERS (and `applies`)."""
    return pytest.mark.xfail(
        DROPS_BARRIERS and applies,
        reason="JAX 0.10's XLA:CPU drops optimization barriers: no gather order, no remat",
        raises=AssertionError,
        strict=True,
    )


def place(mesh, params, x, y):
    """Host arrays to the mesh, sharded as the step stores them."""
    with jax.set_mesh(mesh):
        return shard_params(jax.tree.map(jnp.asarray, params)), shard_batch(x), shard_batch(y)


def flat(tree):
    """The leaves in one vector. For jax.Arrays, a jax.Array on one of their
    devices: assert_close reads the platform they were computed on (the
    values are gathered through the host, which sharded leaves need)."""
    leaves = jax.tree.leaves(tree)
    vector = np.concatenate([np.ravel(leaf) for leaf in leaves])
    if not all(isinstance(leaf, jax.Array) for leaf in leaves):
        return vector  # the float64 oracle's NumPy arrays
    return jax.device_put(vector, min(leaves[0].devices(), key=lambda d: d.id))


def on_the_meshs_platform(mesh, tree):
    """tree on the first device of `mesh`, committed: the reference runs on
    the platform the sharded step runs on, and the two compare like with like.
    Where mesh_devices falls back to simulated CPU devices (a mesh of 8 on a
    host with one TPU), that is the CPU: the reference on the TPU would differ
    from the CPU's step by the TPU's float32 tanh, not by the sharding."""
    return jax.device_put(tree, mesh.devices.flat[0])


# The configured policy on 8 devices and on one, and none
# (test_checkpoint_policy_lowers_temporary_memory compares with it).
@pytest.mark.parametrize(("devices", "remat"), [(8, REMAT), (1, REMAT), (8, None)])
def test_loss_and_gradients_match_reference(rng, devices, remat):
    mesh = make_mesh(mesh_devices(devices))
    params, x, y = make_problem(rng, LAYERS)
    sharded = place(mesh, params, x, y)
    with jax.set_mesh(mesh):
        value, grads = jax.jit(jax.value_and_grad(lambda *a: loss(*a, remat=remat)))(*sharded)
    # The reference, on plain single-device arrays (test_reference.py checks it).
    plain = on_the_meshs_platform(mesh, (params, x, y))
    want_value, want_grads = jax.jit(jax.value_and_grad(reference_loss))(*plain)
    assert want_value.devices() <= set(mesh.devices.flat)  # whatever the default device
    assert_close(value, want_value, VALUES)
    assert_close(flat(grads), flat(want_grads), GRADIENTS)
    # The gradients come back stored like the parameters: no gather at the end.
    for g, w in zip(jax.tree.leaves(grads), jax.tree.leaves(sharded[0]), strict=True):
        assert g.sharding == w.sharding


@pytest.mark.parametrize("devices", DEVICE_COUNTS)
def test_train_step_matches_reference_and_float64(rng, devices):
    mesh = make_mesh(mesh_devices(devices))
    params, x, y = make_problem(rng, LAYERS)
    momentum = jax.tree.map(lambda w: rng.standard_normal(w.shape).astype(w.dtype), params)
    sharded_params, xs, ys = place(mesh, params, x, y)
    sharded_momentum, _, _ = place(mesh, momentum, x, y)
    with jax.set_mesh(mesh):
        got = train_step(sharded_params, sharded_momentum, xs, ys)
    plain = on_the_meshs_platform(mesh, (params, momentum, x, y))
    want = jax.jit(reference_step)(*plain)
    want64 = step_f64(params, momentum, x, y)
    for g, w, w64 in zip(got, want, want64, strict=True):
        assert_close(flat(g), flat(w), STEPS)
        assert_close(flat(g), flat(w64), STEPS)


def test_float64(rng):
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, LAYERS, dtype="float64")
    momentum = jax.tree.map(np.zeros_like, params)
    sharded_params, xs, ys = place(mesh, params, x, y)
    sharded_momentum, _, _ = place(mesh, momentum, x, y)
    with jax.set_mesh(mesh):
        new_params, _, value = train_step(sharded_params, sharded_momentum, xs, ys)
    want = step_f64(params, momentum, x, y)
    assert all(w.dtype == jnp.float64 for w in new_params[0])
    assert_close(flat(new_params), flat(want[0]), STEPS)
    assert_close(value, want[2], VALUES)


def dims(shape: str) -> tuple[int, ...]:
    """f32[64,256]{1,0} -> (64, 256)"""
    inside = re.search(r"\[([\d,]*)\]", shape).group(1)
    return tuple(int(d) for d in inside.split(",") if d)


def split(shape, spec, mesh, axes):
    """`shape` with each dimension that `spec` puts on one of `axes` divided
    by that mesh axis's size."""
    return tuple(n // mesh.shape[a] if a in axes else n for n, a in zip(shape, spec, strict=True))


def gathered_bytes(params, mesh):
    """The bytes of each of one block's weights as its all-gather makes it:
    whole over data, its model slice with tensor parallelism."""
    return [
        int(np.prod(split(w.shape, spec, mesh, [MODEL]))) * w.dtype.itemsize
        for w, spec in zip(params[0], SPECS, strict=True)
    ]


GATHERED_WEIGHTS = sum(axis is not None for axis in GATHER_AXES)  # per block


_STEP_TEXT = {}


def step_text(mesh, params, momentum, x, y):
    """train_step's compiled program on the mesh: compiled once per set of
    shapes, since two tests read the same program."""
    key = (mesh, *(jax.typeof(a) for a in jax.tree.leaves((params, momentum, x, y))))
    if key not in _STEP_TEXT:
        with jax.set_mesh(mesh):
            _STEP_TEXT[key] = train_step.lower(params, momentum, x, y).compile().as_text()
    return _STEP_TEXT[key]


# In the edit loop (-m quick): a new weight left replicated, or one all-gather
# more in the block, shows here first.
@pytest.mark.quick
@barriers_dropped(REMAT == "regather")  # save-gathered: one gather either way
def test_compiled_step_has_exactly_the_chosen_collectives(rng):
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, LAYERS)
    sharded = place(mesh, params, x, y)
    text = step_text(mesh, sharded[0], sharded[0], *sharded[1:])
    found = Counter((c.op, dims(c.shape)) for c in collectives(text))

    batch, d = x.shape
    data = mesh.shape[DATA]
    gathers = 2 if REMAT == "regather" else 1  # a second gather of each weight in the backward
    want = Counter({("all-reduce", ()): 1})  # the loss, summed over the data shards
    for w, spec, axis in zip(params[0], SPECS, GATHER_AXES, strict=True):
        stored = split(w.shape, spec, mesh, [DATA, MODEL])
        if axis is None:
            # Not split over data: its gradient summed over the batch shards.
            want["all-reduce", stored] += LAYERS
            continue
        # Each block's weights, whole over data (their model slice with TP)...
        want["all-gather", split(w.shape, spec, mesh, [MODEL])] += gathers * LAYERS
        # ...and their gradients, summed over the batch shards and split back.
        want["reduce-scatter", stored] += LAYERS
    if TENSOR_PARALLEL:
        # One psum per block in the forward, one per block but the first in
        # the backward (the first block's input needs no gradient).
        want[("all-reduce", (batch // data, d))] += 2 * LAYERS - 1
    assert found == want


def compiled_loss(mesh, sharded, remat, grad=True):
    """loss (or its gradient) with the policy `remat`, compiled on `mesh`."""
    with jax.set_mesh(mesh):
        fn = partial(loss, remat=remat)
        return jax.jit(jax.grad(fn) if grad else fn).lower(*sharded).compile()


def temp_bytes(compiled):
    return compiled.memory_analysis().temp_size_in_bytes


def all_gathers(compiled):
    return sum(c.op == "all-gather" for c in collectives(compiled.as_text()))


# A size where the weights dominate the temporary memory: each device's 8 rows
# of the batch are small next to a block's gathered weights (in the example,
# 2 x 128 x 512 floats, 256 KiB each), and there are 4 blocks of them.
RESIDENCY_LAYERS = 4


@barriers_dropped()
def test_one_blocks_gathered_weights_are_live_at_a_time(rng):
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, RESIDENCY_LAYERS, batch=64, d=128)
    sharded = place(mesh, params, x, y)
    weights = gathered_bytes(params, mesh)
    block = sum(weights)  # one block's weights, gathered
    for remat in POLICIES:
        forward = temp_bytes(compiled_loss(mesh, sharded, remat, grad=False))
        # Each block's weights are gathered after the previous block is done:
        # at least its largest weight (XLA may free one weight before it
        # gathers the next) and some small activations, never two blocks'.
        assert max(weights) <= forward < 2 * block, (remat, forward, block)
    grad = {remat: compiled_loss(mesh, sharded, remat) for remat in POLICIES}
    # regather keeps nothing: the backward gathers each block's weights again,
    # when it reaches the block, so it too holds one block's at a time.
    assert temp_bytes(grad["regather"]) < 2 * block, (temp_bytes(grad["regather"]), block)
    assert all_gathers(grad["regather"]) == 2 * GATHERED_WEIGHTS * RESIDENCY_LAYERS
    # save-gathered keeps every block's gathered weights from the forward for
    # the backward: all of them at once, each gathered once.
    saved = temp_bytes(grad["save-gathered"])
    assert saved >= RESIDENCY_LAYERS * block, (saved, block)
    assert all_gathers(grad["save-gathered"]) == GATHERED_WEIGHTS * RESIDENCY_LAYERS


@barriers_dropped()
def test_checkpoint_policy_lowers_temporary_memory(rng):
    # A size where the activations dominate: what the backward keeps of them
    # is what the policies change.
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, LAYERS, batch=512)
    sharded = place(mesh, params, x, y)
    temp = {remat: temp_bytes(compiled_loss(mesh, sharded, remat)) for remat in [*POLICIES, None]}
    # Whatever the bake's choice, the order is the point of the option:
    # keeping less for the backward needs less memory.
    assert temp["regather"] < temp["save-gathered"] < temp[None], temp
    # train_step, the program users run, differentiates the loss with its
    # configured policy: of these gradients, its temporary memory is nearest
    # to that policy's (the update adds little: it runs in the donated buffers).
    with jax.set_mesh(mesh):
        step = temp_bytes(train_step.lower(sharded[0], sharded[0], *sharded[1:]).compile())
    nearest = min(temp, key=lambda remat: abs(temp[remat] - step))
    assert nearest == REMAT, (step, temp)


@pytest.mark.quick  # a donated buffer read after the step shows here
def test_donated_state_is_deleted_and_its_buffers_reused(rng):
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, LAYERS)
    sharded_params, xs, ys = place(mesh, params, x, y)
    momentum, _, _ = place(mesh, jax.tree.map(np.zeros_like, params), x, y)
    text = step_text(mesh, sharded_params, momentum, xs, ys)
    with jax.set_mesh(mesh):
        before = {
            s.data.unsafe_buffer_pointer()
            for w in jax.tree.leaves(sharded_params)
            for s in w.addressable_shards
        }
        new_params, new_momentum, _ = train_step(sharded_params, momentum, xs, ys)
    # Every parameter and momentum buffer is an alias of an output...
    aliases = re.search(r"input_output_alias=\{(.*?)\}\s*,\s*entry", text)
    assert aliases is not None, "no input_output_alias in the compiled program"
    donated = 2 * len(params[0]) * LAYERS
    assert aliases.group(1).count("may-alias") + aliases.group(1).count("must-alias") == donated
    # ...the arrays passed in are gone, and the new parameters live in their buffers.
    assert all(w.is_deleted() for w in jax.tree.leaves((sharded_params, momentum)))
    after = {
        s.data.unsafe_buffer_pointer()
        for w in jax.tree.leaves(new_params)
        for s in w.addressable_shards
    }
    assert after == before
    assert not xs.is_deleted()


def test_bad_input_raises_clear_error(rng):
    mesh = make_mesh(mesh_devices(8))
    params, x, y = make_problem(rng, 2, batch=10)
    plain = jax.tree.map(jnp.asarray, (params, x, y))
    with (
        jax.set_mesh(mesh),
        pytest.raises(
            ValueError, match=r"batch 10 is not divisible by the \d devices of mesh axis 'data'"
        ),
    ):
        loss(*plain)
    params, x, y = make_problem(rng, 2)
    bad = [params[0], (*params[1][:-1], params[1][-1][..., :-1])]  # the last weight cut short
    with jax.set_mesh(mesh), pytest.raises(ValueError, match=r"block 1: \w+ must be \("):
        loss(jax.tree.map(jnp.asarray, bad), jnp.asarray(x), jnp.asarray(y))
    with jax.set_mesh(mesh), pytest.raises(ValueError, match="x and y must both be"):
        loss(jax.tree.map(jnp.asarray, params), jnp.asarray(x), jnp.asarray(y[:, :-1]))
    odd, x, y = make_problem(rng, 1, d=6)
    with jax.set_mesh(mesh), pytest.raises(ValueError, match="not divisible by the"):
        loss(jax.tree.map(jnp.asarray, odd), jnp.asarray(x), jnp.asarray(y))
    with pytest.raises(ValueError, match=r"call inside jax.set_mesh"):
        loss(*plain)
