"""Rung 6, FFI: the op as C++ handlers (csrc/rms_norm.cc) that XLA calls on the CPU.

What it buys: any C++ (or CUDA) you already have, called from inside a jitted program with
no copy and no Python on the way. Here the forward returns y and the inverse RMS r, and the
backward, a second handler, returns dx and dw, tied together by a jax.custom_vjp.

What it costs: a compiler and a build (CMake, nanobind), one handler per platform, and XLA
knows nothing of what the handler does. vmap runs the handler once per batch element
(vmap_method="sequential"), there is no forward mode, and under a sharded jit the partitioner
cannot split a custom call: it gathers the operands onto every device.

The handlers here are CPU-only: rms_norm runs operands not committed to a device on the CPU,
also where the default device is a GPU, and a call lowered for another platform is refused
while lowering, with one clear NotImplementedError (not XLA's "No FFI handler registered ...
on a platform CUDA" when it compiles).
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from shared import cpu_ffi

EPS = 1e-6
TARGETS = {
    "forward": "jax_ladder_ladder_rms_norm_fwd",
    "backward": "jax_ladder_ladder_rms_norm_bwd",
}


def load_extension():
    """The standalone build first (a developer's fresh build wins), then the kit's copy."""
    return cpu_ffi.load_extension(
        Path(__file__).resolve().parent, "_rms_norm_ffi", "jax_ladder._ladder_example"
    )


for _name, _capsule in load_extension().handlers().items():
    jax.ffi.register_ffi_target(TARGETS[_name], _capsule, platform="cpu")

# An identity on the operands that lowers only for the CPU: lowered for another platform it
# refuses, before XLA meets a custom call it has no handler for there (shared/cpu_ffi.py).
_cpu_only_p = cpu_ffi.cpu_only_primitive(
    "ladder_rms_norm_cpu_only",
    "the FFI rung's handlers are CPU-only, and this call is being lowered for {platforms}: "
    "pass operands placed on jax.devices('cpu')[0], or jit and call it under "
    "`with jax.default_device('cpu'):`",
)


def rms_norm(x, w):
    """x: (..., d) float32, w: (d,) float32 -> (..., d). Reverse-mode differentiable.

    Operands not committed to a device run on the CPU (an outer jit decides for itself)."""
    with jax.default_device("cpu"):
        x, w = jnp.asarray(x), jnp.asarray(w)
        if x.dtype != jnp.float32 or w.dtype != jnp.float32:
            raise TypeError(f"the handler takes float32 x and w, got {x.dtype} and {w.dtype}")
        if x.ndim < 1 or w.shape != x.shape[-1:]:
            raise ValueError(f"need x (..., d) and w (d,), got {x.shape} and {w.shape}")
        return _rms_norm(x, w)


def _forward(x, w):
    results = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], x.dtype))
    call = jax.ffi.ffi_call(TARGETS["forward"], results, vmap_method="sequential")
    x, w = _cpu_only_p.bind(x, w)
    return call(x, w, eps=np.float32(EPS))  # the attribute's type must match: Attr<float>


@jax.custom_vjp
def _rms_norm(x, w):
    return _forward(x, w)[0]


def _fwd(x, w):
    y, r = _forward(x, w)
    return y, (x, w, r)


def _bwd(residuals, dy):
    x, w, r = residuals
    results = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype))
    call = jax.ffi.ffi_call(TARGETS["backward"], results, vmap_method="sequential")
    return call(*_cpu_only_p.bind(x, w, r, dy))


_rms_norm.defvjp(_fwd, _bwd)
