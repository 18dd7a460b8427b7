{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
{%- set op = cookiecutter.op_name -%}
{%- if cookiecutter.example == "none" -%}
"""The model in plain JAX: what gets exported, and the reference the reloaded
artifact is checked against (tests/op_spec.py holds its float64 oracle).

TODO: replace init_params with loading your trained weights and {{ op }} with
your model, a pure function of (params, inputs). This skeleton's model is the
identity{% if seq %} on real tokens (padding gives 0){% else %} (non-finite values give 0){% endif %}, with no weights.
"""

from typing import TypeAlias

import jax
import jax.numpy as jnp

# The model's weights by name: what init_params returns and {{ op }} takes.
Params: TypeAlias = dict[str, jax.Array]

# The precision to give every float32 matmul of your model (and so of the
# artifact: it is baked into the exported StableHLO), e.g.
# jnp.matmul(a, b, precision=MATMUL_PRECISION). Unless a program asks, the
# platform chooses: on NVIDIA GPUs XLA's float32 default is TensorFloat-32
# (about 1e4 float32 ulps off), on CPUs full float32. HIGHEST computes in
# float32 everywhere, so the CPU tests check the numbers a GPU gives (see the
# README; tests/test_conformance.py holds every float32 matmul to it).
MATMUL_PRECISION = jax.lax.Precision.HIGHEST

FEATURES = 16  # static: part of the artifact's input signature


def init_params(seed: int = 0) -> Params:
    """The weights (none here): deterministic for a seed."""
    del seed
    return {}
{% if seq %}

def {{ op }}(params: Params, x: jax.Array, mask: jax.Array) -> jax.Array:
    """x: (batch, seq, FEATURES) float32; mask: (batch, seq) bool, True for
    real tokens. Returns x where mask is True, else 0: (batch, seq, FEATURES)."""
    del params
    return jnp.where(mask[..., None], x, jnp.zeros_like(x))
{% else %}

def {{ op }}(params: Params, x: jax.Array) -> jax.Array:
    """x: (batch, FEATURES) float32 -> x itself where finite, else 0: (batch, FEATURES)."""
    del params
    return jnp.where(jnp.isfinite(x), x, 0.0)
{% endif -%}
{%- else -%}
"""The model in plain JAX: what gets exported, and the reference the reloaded
artifact is checked against (tests/op_spec.py holds its float64 NumPy oracle).

Replace init_params with loading your trained weights and {{ op }} with your
model; keep {{ op }} a pure function of (params, inputs).
"""

from functools import partial
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

# The model's weights by name: what init_params returns and {{ op }} takes.
Params: TypeAlias = dict[str, jax.Array]

# The precision of every float32 matmul of the model, and so of the artifact
# (it is baked into the exported StableHLO). Unless a program asks, the
# platform chooses: on NVIDIA GPUs XLA's float32 default is TensorFloat-32
# (10-bit mantissa products, about 1e4 float32 ulps off), on TPUs one
# bfloat16 pass (8-bit significands: 4.6e4 ulps measured on a v5e), on CPUs
# full float32. HIGHEST computes in float32 everywhere (1 ulp on the v5e, in
# six bfloat16 passes), so the CPU tests check the numbers an accelerator
# gives. For speed, choose DEFAULT and declare what it keeps in
# tests/op_spec.py (OpSpec.matmul_inputs, e.g. {"gpu": "tensorfloat32",
# "tpu": "bfloat16"}), which widens the tests' tolerance on that platform;
# see the README.
MATMUL_PRECISION = jax.lax.Precision.HIGHEST
_matmul = partial(jnp.matmul, precision=MATMUL_PRECISION)
_einsum = partial(jnp.einsum, precision=MATMUL_PRECISION)

FEATURES = 16  # static: part of the artifact's input signature
HIDDEN = 32
CLASSES = 4
{%- if seq %}
MAX_LEN = 128  # the positional table's length: sequences may not be longer
{%- endif %}


def init_params(seed: int = 0) -> Params:
    """Deterministic stand-in weights (float32)."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float) -> jax.Array:
        return jnp.asarray(scale * rng.standard_normal(shape), jnp.float32)

    return {
        "w_in": normal(FEATURES, HIDDEN, scale=FEATURES**-0.5),
        "b_in": normal(HIDDEN, scale=0.1),
{%- if seq %}
        "position": normal(MAX_LEN, HIDDEN, scale=0.1),
        "query": normal(HIDDEN, scale=HIDDEN**-0.5),
{%- endif %}
        "w_out": normal(HIDDEN, CLASSES, scale=HIDDEN**-0.5),
        "b_out": normal(CLASSES, scale=0.1),
    }
{% if seq %}

def {{ op }}(params: Params, x: jax.Array, mask: jax.Array) -> jax.Array:
    """MLP classifier with attention pooling over the sequence.

    x: (batch, seq, FEATURES) float32; mask: (batch, seq) bool, True for real
    tokens, with seq <= MAX_LEN. Returns logits (batch, CLASSES). A row whose
    mask is all False pools nothing: its logits are b_out.
    """
    seq = x.shape[1]  # symbolic when exported: jnp code must not branch on it
    h = jnp.tanh(_matmul(x, params["w_in"]) + params["b_in"] + params["position"][:seq])
    scores = jnp.where(mask, _matmul(h, params["query"]), -jnp.inf)
    any_token = jnp.any(mask, axis=1, keepdims=True)
    # Double where: an all-masked row would give softmax(-inf, ...) = NaN. The
    # second where alone would keep that NaN out of the value and the gradient,
    # but not out of jax_debug_nans, nor out of code that uses weights first:
    # feed such rows zeros, so no NaN is computed, then zero their weights.
    weights = jax.nn.softmax(jnp.where(any_token, scores, 0.0), axis=1)
    weights = jnp.where(mask, weights, 0.0)
    pooled = _einsum("bs,bsh->bh", weights, h)
    return _matmul(pooled, params["w_out"]) + params["b_out"]
{% else %}

def {{ op }}(params: Params, x: jax.Array) -> jax.Array:
    """Two-layer MLP classifier: x (batch, FEATURES) float32 -> logits (batch, CLASSES)."""
    h = jnp.tanh(_matmul(x, params["w_in"]) + params["b_in"])
    return _matmul(h, params["w_out"]) + params["b_out"]
{% endif -%}
{% endif -%}
