"""Rung 7, a new primitive: rms_norm_p, with every rule JAX asks of a primitive.

What it buys: the op is a first-class JAX primitive (one equation in a jaxpr, its own name in
the HLO metadata), with rules for exactly what it supports: abstract evaluation (shapes,
dtypes, errors at trace time), lowering (here through mlir.lower_fun: the plain-JAX
computation, so every platform and the sharding partitioner handle it), a JVP whose tangent
is built from linear JAX operations (so JAX transposes it into the VJP, and forward mode,
reverse mode and higher orders all work), and a batching rule (one call on a leading batch
axis, not a loop).

What it costs: the rule registries (jax.interpreters.ad, batching, mlir) are public but less
stable than jax.numpy; this is the most code of any rung for an op JAX could already express.
"""

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

EPS = 1e-6

rms_norm_p = Primitive("ladder_rms_norm")


def rms_norm(x, w):
    """x: (..., d) float32, w: (d,) float32 -> (..., d)."""
    return rms_norm_p.bind(jnp.asarray(x), jnp.asarray(w))


def _inverse_rms(x):
    return 1.0 / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def _compute(x, w):
    return x * _inverse_rms(x) * w


def _abstract_eval(x, w):
    if x.ndim < 1:
        raise TypeError(f"rms_norm: x must have at least one axis, got shape {x.shape}")
    if w.shape != x.shape[-1:]:
        raise TypeError(f"rms_norm: w must have shape ({x.shape[-1]},), got {w.shape}")
    if x.dtype != w.dtype or not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"rms_norm: x and w must share a floating dtype, got {x.dtype}, {w.dtype}")
    return jax.core.ShapedArray(x.shape, x.dtype, sharding=x.sharding)


rms_norm_p.def_abstract_eval(_abstract_eval)
_compiled = jax.jit(_compute)


def _impl(x, w):
    _abstract_eval(jax.typeof(x), jax.typeof(w))  # eager calls skip abstract evaluation
    return _compiled(x, w)


rms_norm_p.def_impl(_impl)
mlir.register_lowering(rms_norm_p, mlir.lower_fun(_compute, multiple_results=False))


def _jvp(primals, tangents):
    x, w = primals
    tx, tw = (ad.instantiate_zeros(t) for t in tangents)
    y = rms_norm_p.bind(x, w)
    # The tangent is linear in (tx, tw) and uses only jax.numpy: JAX transposes it for grad.
    r = _inverse_rms(x)
    x_hat = x * r
    t_hat = r * (tx - x_hat * jnp.mean(x_hat * tx, axis=-1, keepdims=True))
    return y, t_hat * w + x_hat * tw


ad.primitive_jvps[rms_norm_p] = _jvp


def _batch(args, dims):
    (x, w), (x_dim, w_dim) = args, dims
    size = x.shape[x_dim] if x_dim is not None else w.shape[w_dim]
    x = batching.bdim_at_front(x, x_dim, size)  # a new leading axis is one more row axis
    if w_dim is None:
        return rms_norm_p.bind(x, w), 0
    # One weight per batch element: normalize with unit weight, then scale.
    w = batching.bdim_at_front(w, w_dim, size)
    unit = rms_norm_p.bind(x, jnp.ones(x.shape[-1:], x.dtype))
    return unit * w.reshape(size, *(1,) * (x.ndim - 2), -1), 0


batching.primitive_batchers[rms_norm_p] = _batch
