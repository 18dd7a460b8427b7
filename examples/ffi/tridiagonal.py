"""Batched tridiagonal solves by a C++ XLA FFI handler (the Thomas algorithm), differentiable.

    x = tridiagonal_solve(dl, d, du, b)    solves  dl[i] x[i-1] + d[i] x[i] + du[i] x[i+1] = b[i]

for every system in the batch. All four operands have shape (..., n); dl[..., 0] and du[..., -1]
are ignored, as in jax.lax.linalg.tridiagonal_solve. The handler (csrc/) reaches Python as a
PyCapsule from the compiled module `_tridiagonal_ffi`; importing this module loads it and
registers it with XLA under TARGET. jax.ffi.ffi_call emits the custom call, and jax.custom_vjp
supplies the gradient (an ffi_call has no autodiff rule of its own).

The handler exists for the CPU alone. tridiagonal_solve runs operands that were not placed on a
device on purpose (NumPy arrays, uncommitted jax arrays) on the CPU, also where the default
device is a GPU; a call lowered for another platform (operands committed to a GPU, or an outer
jit placed there) is refused while lowering, with a NotImplementedError that says how to run it
on the CPU, instead of failing in XLA with "No FFI handler registered ... on a platform CUDA".
"""

from pathlib import Path

import jax
import jax.numpy as jnp
from shared import cpu_ffi

__all__ = ["TARGET", "load_extension", "tridiagonal_solve"]

# Target names are process-wide: a distinctive one cannot collide with another project's.
TARGET = "jax_ladder_example_tridiagonal_solve"


def load_extension():
    """The compiled module: the standalone build first (a developer's fresh build wins over an
    older installed one), then the copy the kit installs."""
    return cpu_ffi.load_extension(
        Path(__file__).resolve().parent, "_tridiagonal_ffi", "jax_ladder._ffi_example"
    )


jax.ffi.register_ffi_target(
    TARGET, load_extension().cpu_handlers()["tridiagonal_solve"], platform="cpu"
)

SUPPORTED_DTYPES = (jnp.float32, jnp.float64)

# --- CPU only -------------------------------------------------------------------------------
# An identity on the operands that lowers only for the CPU: any other lowering platform gets
# this one clear refusal before XLA sees the custom call (shared/cpu_ffi.py).
_cpu_only_p = cpu_ffi.cpu_only_primitive(
    "tridiagonal_solve_cpu_only",
    "tridiagonal_solve: this example's FFI handler is CPU-only, and this call is being "
    "lowered for {platforms}. Run it on the CPU: pass operands placed on "
    "jax.devices('cpu')[0] (jax.device_put), or jit and call it under "
    "`with jax.default_device('cpu'):`. (jax.lax.linalg.tridiagonal_solve runs on GPUs.)",
)


def tridiagonal_solve(dl, d, du, b):
    """Solve the tridiagonal systems (dl, d, du) x = b, one per leading index.

    dl, d, du, b: arrays of one shape (..., n), n >= 1, and one dtype, float32 or float64.
    Returns x with that shape and dtype. Works under jit and vmap and is differentiable in
    reverse mode with respect to all four operands (the gradients of the ignored dl[..., 0]
    and du[..., -1] are zero).

    No pivoting (see csrc/thomas.h): meant for diagonally dominant or symmetric positive
    definite matrices. A system with an exactly zero pivot gets an all-NaN x; the others in
    the batch are unaffected. Bad operands raise TypeError or ValueError here, before any
    call; the handler checks them again and would raise jax.errors.JaxRuntimeError.

    The handler is CPU-only: operands not committed to a device run on the CPU; a call
    lowered for another platform raises NotImplementedError (see the module's docstring).
    """
    # The default device decides where an eager call with uncommitted operands runs; under
    # an outer jit this changes nothing, and that jit's platform decides.
    with jax.default_device("cpu"):
        dl, d, du, b = (jnp.asarray(a) for a in (dl, d, du, b))
        _check_operands(dl=dl, d=d, du=du, b=b)
        return _solve(dl, d, du, b)


def _check_operands(**operands):
    """Shapes and dtypes are static, so this also runs (once, while tracing) under jit."""
    d = operands["d"]
    if d.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"tridiagonal_solve: d has dtype {d.dtype}; expected float32 or float64")
    for name, a in operands.items():
        if a.dtype != d.dtype:
            raise TypeError(
                f"tridiagonal_solve: {name} has dtype {a.dtype} but d has {d.dtype}; "
                "all four operands must have one dtype"
            )
    if d.ndim == 0:
        raise ValueError("tridiagonal_solve: d is a scalar; operands must have shape (..., n)")
    for name, a in operands.items():
        if a.shape != d.shape:
            raise ValueError(
                f"tridiagonal_solve: {name} has shape {a.shape} but d has {d.shape}; "
                "all four operands must have one shape (..., n)"
            )
    if d.shape[-1] == 0:
        # The handler refuses n = 0 too, but XLA skips a custom call whose results are all
        # empty, so only this check is sure to run.
        raise ValueError(f"tridiagonal_solve: systems of size 0 (shape {d.shape}); need n >= 1")


def _ffi_solve(dl, d, du, b):
    # vmap_method="broadcast_all": under vmap the handler receives every operand with the
    # batch axis in front, which to a batched solver is just more systems: one call.
    call = jax.ffi.ffi_call(
        TARGET, jax.ShapeDtypeStruct(b.shape, b.dtype), vmap_method="broadcast_all"
    )
    return call(*_cpu_only_p.bind(dl, d, du, b))


def _transposed(dl, du):
    """The diagonals of A^T: its lower diagonal is A's upper one shifted down by one, and
    its upper diagonal A's lower one shifted up, each with the ignored end set to zero."""
    zero = jnp.zeros_like(dl[..., :1])
    return (
        jnp.concatenate([zero, du[..., :-1]], axis=-1),
        jnp.concatenate([dl[..., 1:], zero], axis=-1),
    )


@jax.custom_vjp
def _solve(dl, d, du, b):
    return _ffi_solve(dl, d, du, b)


def _solve_fwd(dl, d, du, b):
    # Calling the custom_vjp function itself (not _ffi_solve) keeps the rules differentiable,
    # so reverse-over-reverse (grad of grad) works too.
    x = _solve(dl, d, du, b)
    return x, (dl, d, du, x)


def _solve_bwd(residuals, x_bar):
    """x = A^-1 b, so b_bar = A^-T x_bar =: lam and A_bar = -lam x^T, of which only the three
    diagonals are operands: d_bar[i] = -lam[i] x[i], dl_bar[i] = -lam[i] x[i-1] and
    du_bar[i] = -lam[i] x[i+1]. The transposed solve is another call of the same handler."""
    dl, d, du, x = residuals
    dl_t, du_t = _transposed(dl, du)
    lam = _solve(dl_t, d, du_t, x_bar)
    zero = jnp.zeros_like(x[..., :1])
    x_left = jnp.concatenate([zero, x[..., :-1]], axis=-1)  # x[i-1], 0 where dl is ignored
    x_right = jnp.concatenate([x[..., 1:], zero], axis=-1)  # x[i+1], 0 where du is ignored
    return -lam * x_left, -lam * x, -lam * x_right, lam


_solve.defvjp(_solve_fwd, _solve_bwd)
