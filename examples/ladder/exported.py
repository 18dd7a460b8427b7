"""Rung 3, exported artifact: the op serialized with jax.export, then loaded and called.

What it buys: a versioned StableHLO artifact, bytes that another process (a server, a C++
runtime, a later JAX) loads without this Python source. The batch dimension is symbolic, so
one artifact serves every number of rows; the feature size d is fixed, as a model's hidden
size is. serialize(vjp_order=1) stores the VJP too, so the loaded op is differentiable once.

What it costs: the loaded op is a black box to JAX's transformations. No vmap (call_exported
has no batching rule), no forward mode, no second derivative, and the platforms are fixed at
export time (here: the one JAX runs on, and the CPU, where a one-GPU machine's sharding tests
run on simulated devices; one artifact holds a lowering for each).
"""

import functools

import jax
import jax.numpy as jnp
from jax import export

EPS = 1e-6


def _rms_norm(x, w):
    rms = jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)
    return x / rms * w


def export_bytes(d, dtype=jnp.float32):
    """Export the jitted op for x: (b, d) with b symbolic, w: (d,); return the bytes."""
    (b,) = export.symbolic_shape("b")
    x_spec = jax.ShapeDtypeStruct((b, d), dtype)
    w_spec = jax.ShapeDtypeStruct((d,), dtype)
    platforms = tuple(dict.fromkeys((export.default_export_platform(), "cpu")))
    exported = export.export(jax.jit(_rms_norm), platforms=platforms)(x_spec, w_spec)
    return exported.serialize(vjp_order=1)


@functools.cache
def load(d, dtype=jnp.float32):
    """The deserialized artifact for feature size d (exported once per process, here)."""
    return export.deserialize(export_bytes(d, jnp.dtype(dtype)))


def rms_norm(x, w):
    """x: (rows, d) float32, w: (d,) float32 -> (rows, d), through the loaded artifact."""
    if x.ndim != 2:
        raise ValueError(f"the artifact takes x of shape (rows, d), got {x.shape}")
    return load(x.shape[1], x.dtype).call(x, w)
