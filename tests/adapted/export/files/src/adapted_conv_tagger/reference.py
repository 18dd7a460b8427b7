"""The model in plain JAX: what gets exported, and the reference the reloaded
artifact is checked against (tests/op_spec.py holds its float64 NumPy oracle).
"""

from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# The model's weights by name: what init_params returns and conv_tagger takes.
Params: TypeAlias = dict[str, jax.Array]

FEATURES = 16  # static: part of the artifact's input signature
CHANNELS = 32
CLASSES = 4
WIDTH = 3  # the convolution's kernel: each token sees one neighbour on each side


def init_params(seed: int = 0) -> Params:
    """Deterministic stand-in weights (float32)."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float) -> jax.Array:
        return jnp.asarray(scale * rng.standard_normal(shape), jnp.float32)

    return {
        "kernel": normal(WIDTH, FEATURES, CHANNELS, scale=(WIDTH * FEATURES) ** -0.5),
        "bias": normal(CHANNELS, scale=0.1),
        "w_out": normal(CHANNELS, CLASSES, scale=CHANNELS**-0.5),
        "b_out": normal(CLASSES, scale=0.1),
    }


def conv_tagger(params: Params, x: jax.Array, mask: jax.Array) -> jax.Array:
    """Per-token classifier: a 1-D convolution along the sequence, tanh, linear.

    x: (batch, seq, FEATURES) float32; mask: (batch, seq) bool, True for real
    tokens. Returns logits (batch, seq, CLASSES), 0 for padding tokens, which
    the convolution reads as zeros (as it reads the sequence's ends).
    """
    x = jnp.where(mask[..., None], x, 0.0)
    half = WIDTH // 2  # explicit padding: the same length, whatever the symbolic s
    kernel = params["kernel"].astype(x.dtype)  # lax.conv does not promote, as @ does
    # HIGHEST: float32 products on every platform (a GPU's default is TF32).
    h = lax.conv_general_dilated(
        x,
        kernel,
        (1,),
        [(half, half)],
        dimension_numbers=("NWC", "WIO", "NWC"),
        precision=lax.Precision.HIGHEST,
    )
    hidden = jnp.tanh(h + params["bias"])
    logits = jnp.matmul(hidden, params["w_out"], precision=lax.Precision.HIGHEST) + params["b_out"]
    return jnp.where(mask[..., None], logits, 0.0)
