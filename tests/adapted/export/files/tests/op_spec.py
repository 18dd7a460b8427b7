"""The declaration of the conv tagger's artifact, the op of this project:
(x, mask) -> per-token classes (b, s, c), loaded from disk with the weights
baked in, against conv_tagger on the same weights."""

import tempfile
from functools import partial
from pathlib import Path

import numpy as np

from adapted_conv_tagger import artifact
from adapted_conv_tagger.reference import conv_tagger, init_params

from compare import Ulps
from conformance import Arg, Collectives, OpSpec, Refuse

# How far the model may be from the oracle, in ulps (tests/compare.py). Its
# outputs and gradients are sums over a window's features and channels whose
# terms cancel (a convolution, tanh, a matmul), so the rounding is on the scale
# of the largest entry, not of each: the example's counts, which it meets.
VALUES = Ulps(at_value=0, at_scale=16)
GRADIENTS = Ulps(at_value=0, at_scale=8)


def conv_tagger_f64(params, x, mask):
    """The model in float64 NumPy, written independently of reference.py: the
    convolution as a sum of shifted matmuls."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    keep = np.asarray(mask, bool)[..., None]
    x = np.where(keep, np.asarray(x, np.float64), 0.0)
    width, seq = p["kernel"].shape[0], x.shape[1]
    padded = np.pad(x, ((0, 0), (width // 2, width // 2), (0, 0)))
    h = sum(padded[:, k : k + seq] @ p["kernel"][k] for k in range(width))
    return np.where(keep, np.tanh(h + p["bias"]) @ p["w_out"] + p["b_out"], 0.0)


# jax.export serializes VJPs, never JVPs: the artifact's derivative is
# reverse mode only.
REVERSE_ONLY = Refuse(
    TypeError,
    r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function",
    "refused: jax.export serializes VJPs only; use reverse mode (grad, vjp)",
)
# Saved with vjp_order=1 (artifact.VJP_ORDER): the artifact's VJP is not
# itself differentiable.
FIRST_ORDER_ONLY = Refuse(
    ValueError,
    r"cannot be differentiated twice: it was serialized with vjp_order=1",
    "refused: serialized with vjp_order=1; re-export with vjp_order=2 for second order",
)
# The artifact's signature is float32, and check_grads' finite differences
# need float64: the gradient cells compare with the float64 oracle instead.
FLOAT32_ONLY = Refuse(
    TypeError,
    r"x must be float32, got float64",
    "refused: the artifact takes float32 only; finite differences need float64"
    " (the gradient cells check it)",
)


def mostly_true(rng, shape):
    """A padding mask: mostly True, as in real batches."""
    return rng.random(shape) < 0.8


# Standardized features: the convolution's sums cancel terms as large as
# the inputs, so the gradient's error grows with them (520 ulps of its
# largest entry at |x| near 88, the hard cells' exp edge; 39 at 16); within
# 4 the tolerances hold.
FEATURES = (-4.0, 4.0)

PARAMS = init_params()
with tempfile.TemporaryDirectory() as tmp:  # load reads the files whole
    LOADED = artifact.load(artifact.save(artifact.export_model(PARAMS), Path(tmp, "model.jax")))

SPEC = OpSpec(
    name="conv_tagger",
    op=LOADED,
    reference=partial(conv_tagger, PARAMS),
    oracle=partial(conv_tagger_f64, PARAMS),
    args=(
        Arg("x", ("b", "s", "f"), domain=FEATURES),
        Arg("mask", ("b", "s"), differentiable=False, dtype="bool", sample=mostly_true),
    ),
    outputs=(("b", "s", "c"),),
    sizes={"b": 8, "s": 4, "f": 16, "c": 4},
    tolerance=VALUES,
    gradient_tolerance=GRADIENTS,
    # No batch_axes: the artifact's signature has b, it takes no input without
    # it; vmap over a new axis folds that axis into b (composable_call).
    shard_map_axes=("b",),
    symbolic_axis="b",
    # Plain StableHLO on every platform exported: the module holds no custom call.
    platforms={"cpu": ""},
    # Split along f, the artifact's convolution sums the features with one
    # all-reduce, in each program; JAX refuses the reference's convolution
    # there (its output sharding is ambiguous).
    extra_collectives={
        "jit-explicit*-f": Collectives(
            "the split features' sums are all-reduced, where JAX refuses the reference's"
            " convolution on these shardings",
            forward={"all-reduce": 1},
            gradient={"all-reduce": 1},
        ),
    },
    refuse={
        "jvp": REVERSE_ONLY,
        "linearize": REVERSE_ONLY,
        "check-grads-*": FLOAT32_ONLY,
        "grad-grad-explicit-*": FIRST_ORDER_ONLY,
        # The artifact (exported for whole arrays) returns its result whole over
        # the Explicit axis a shard_map leaves free; the reference's stays split.
        "shard-map-partial-explicit-b": Refuse(
            AssertionError,
            r"output 0: sharded P\('x', None.*\), the reference's P\(\('x', 'y'\), None.*\)",
            "refused: the result comes back whole over the Explicit axes a shard_map leaves free",
        ),
        "size-f-*": Refuse(
            ValueError,
            r"x.shape\[\d\] must be 16, got",
            "refused: the artifact's features are fixed at export",
        ),
        "size-[bs]-0": Refuse(
            ValueError,
            r"must be >= 1, got 0",
            "refused: the artifact's shape constraints ask for at least one",
        ),
    },
)
