"""Row-wise log-sum-exp computed by C++ XLA FFI handlers, compiled and loaded from one file.

The op, over the last axis of x (every leading axis is a batch of rows):

    logsumexp(x)[...] = log(sum_j exp(x[..., j]))      x: (..., n) float32|float64 -> (...)
    its VJP:            dx = g[..., None] * softmax(x)  (softmax = exp(x - lse[..., None]))

``logsumexp.cc`` (next to this file) holds two typed XLA FFI handlers, forward and
backward, exported as plain ``extern "C"`` symbols. ``python logsumexp.py``
compiles it into a shared library in a temporary directory with the system C++ compiler
(``$CXX``, else ``c++``, ``g++`` or ``clang++``; only JAX's header-only ``xla/ffi/api/ffi.h`` is
needed), loads it with ``ctypes``, registers both symbols with
``jax.ffi.register_ffi_target``, defines the op with ``jax.ffi.ffi_call`` plus
``jax.custom_vjp``, and checks it against ``jax.nn.logsumexp`` and float64 NumPy. It exits 0
when every check passes, 1 when one fails (or the build fails), 2 when no C++ compiler is found.

When to use this rung (8 of 9, the last before JAX's internals): when the computation cannot be
written well in JAX at all. You already have C/C++ code to call (a library, a vendor kernel, a
simulator), or it needs data structures and control flow XLA cannot express, or you measured
that XLA's code is too slow and Pallas cannot help on your backend (on CPU Pallas only
interprets). Everything else becomes your job: the gradient (an ``ffi_call`` has no autodiff
rule, hence the ``custom_vjp`` here), batching (``vmap_method``), one handler per platform,
sharding (XLA gathers a custom call's operands onto every device unless you work around it),
argument validation (XLA checks no shapes: see the .cc), and portability of saved programs
(below). Log-sum-exp itself is only a small real op to show the moving parts: XLA already
compiles ``jax.nn.logsumexp`` well, so do not ship this one.

This file is the quick path: no build system, no Python extension module. For something you
ship, generate the ``ffi`` cookiecutter template (``jax-ladder new ffi``): a pip-installable
package with CMake, nanobind, a thread-pool CPU handler, a CUDA handler, sharding and tests.

To adapt:

- Rename the op: the exported symbol names at the bottom of the .cc (``LogSumExpForward``,
  ``LogSumExpBackward``) and ``SYMBOLS`` here; the target names ``FORWARD``/``BACKWARD`` here.
  Target names are process-global: prefix them with your project's name.
- Change the binding: ``ffi::Ffi::Bind()`` in the .cc lists, in order, an ``Arg<>`` per array
  operand (``ffi_call(...)(x, lse, g)``), a ``Ret<>`` per entry of ``result_shape_dtypes`` and
  an ``Attr<T>("name")`` per keyword attribute; the Impl function takes them in the same order.
  Keep ``_forward``/``_backward`` here in step, and update the shape checks in the .cc: XLA
  does not check result shapes against anything.
- Add an attribute: ``.Attr<double>("temperature")`` in the binding, a ``double temperature``
  parameter in the Impl, and ``call(x, temperature=np.float64(t))`` here. The type must match
  exactly (a Python float is float64; an ``Attr<float>`` needs ``np.float32``), and it is a
  compile-time constant, so pass it through ``custom_vjp`` with ``nondiff_argnums``.
- Add a dtype: accept it in ``CheckInput`` and add a ``case`` to both ``switch`` statements
  in the .cc (``ffi::DataType::BF16`` has no C++ arithmetic type: convert through float, as
  the cookiecutter template does), then add it to ``DTYPES`` and ``TOLERANCE_IN_EPS`` here.
- Replace ``logsumexp_reference`` (plain JAX) and ``logsumexp_numpy`` (independent float64
  oracle), and the cases and bad inputs in the checks.

Exporting: a ``jax.export`` artifact that contains this custom call is only produced with
``disabled_checks=[export.DisabledSafetyCheck.custom_call(FORWARD)]`` (plus ``BACKWARD`` when
serialized with ``vjp_order=1``), and it comes with no compatibility guarantee: the process
that loads it must have registered a handler under the same name with the same binding and
semantics, and JAX cannot check or version that for you.
"""

import ctypes
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax.test_util import check_grads

# The self-check compares float32 and float64. x64 is process-global: in your own code set it
# once at program start (or not at all), not in a library module.
jax.config.update("jax_enable_x64", True)

SOURCE = Path(__file__).resolve().with_suffix(".cc")
# Target names, process-global in XLA's registry: prefix yours with your project's name.
FORWARD = "ffi_asset_logsumexp_fwd"
BACKWARD = "ffi_asset_logsumexp_bwd"
# target name -> exported symbol in the .cc
SYMBOLS = {FORWARD: "LogSumExpForward", BACKWARD: "LogSumExpBackward"}
DTYPES = (np.float32, np.float64)


# --------------------------------------------------------------------------------------------
# Build, load and register
# --------------------------------------------------------------------------------------------


class NoCompilerError(RuntimeError):
    """No usable C++ compiler."""


class BuildError(RuntimeError):
    """The compiler rejected the .cc file."""


def find_compiler():
    """The compiler command: $CXX (may hold flags, e.g. "ccache g++"), else c++/g++/clang++."""
    if os.environ.get("CXX"):
        command = shlex.split(os.environ["CXX"])
        if not shutil.which(command[0]):
            raise NoCompilerError(f"CXX={os.environ['CXX']!r} is not an executable on PATH")
        return command
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return [path]
    raise NoCompilerError("no C++ compiler found: tried $CXX, c++, g++, clang++ (set CXX)")


def compile_library(source, out_dir):
    """Compile `source` into a shared library in `out_dir`; return its path."""
    library = Path(out_dir) / "liblogsumexp.so"
    command = [
        *find_compiler(),
        "-O3",
        "-std=c++17",
        "-shared",
        "-fPIC",
        "-Wall",
        "-Wextra",
        # -isystem rather than -I: the same include path, without warnings from JAX's headers.
        "-isystem",
        jax.ffi.include_dir(),
        str(source),
        "-o",
        str(library),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"$ {shlex.join(command)}\n{result.stdout}{result.stderr}")
    if result.stderr.strip():
        print(f"compiler warnings:\n{result.stderr.rstrip()}")
    return library


_library = None  # the loaded ctypes.CDLL: keep it alive while XLA may call into it


def build_and_register():
    """Compile the .cc, load it and register its handlers for the CPU (once per process)."""
    global _library
    if _library is not None:
        return
    with tempfile.TemporaryDirectory(prefix="ffi_asset_logsumexp_") as tmp:
        library = ctypes.cdll.LoadLibrary(str(compile_library(SOURCE, tmp)))
    # (The file may go once loaded: the process keeps the mapping.) Each symbol is an
    # `XLA_FFI_Error* fn(XLA_FFI_CallFrame*)`; pycapsule wraps its address for XLA, and
    # api_version=1 (the default) says it is a typed FFI handler, not a legacy custom call.
    for target, symbol in SYMBOLS.items():
        capsule = jax.ffi.pycapsule(getattr(library, symbol))
        jax.ffi.register_ffi_target(target, capsule, platform="cpu")
    _library = library


# --------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------


def logsumexp(x):
    """log(sum(exp(x))) over the last axis of x, by the FFI handler (call build_and_register()).

    x: float32 or float64, rank >= 1, rows of length >= 1. Differentiable in reverse mode
    (grad, vjp), works under jit and vmap. The handler validates x and raises
    jax.errors.JaxRuntimeError naming the problem; under jit that happens when the program runs.
    """
    return _logsumexp(x if isinstance(x, jax.Array) else jnp.asarray(x))


def _forward(x):
    # result_shape_dtypes is a promise XLA does not check: the handler verifies it.
    lse = jax.ShapeDtypeStruct(x.shape[:-1], x.dtype)
    # vmap_method="broadcast_all": under vmap the handler receives every operand with the
    # batch axis moved to the front, which to a row-wise op is just more rows: one call for
    # the whole batch.
    return jax.ffi.ffi_call(FORWARD, lse, vmap_method="broadcast_all")(x)


def _backward(x, lse, cotangent):
    dx = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.ffi.ffi_call(BACKWARD, dx, vmap_method="broadcast_all")(x, lse, cotangent)


# An ffi_call has no autodiff rule of its own: custom_vjp pairs the forward handler with the
# backward one. Forward mode (jvp, jacfwd) raises TypeError.
@jax.custom_vjp
def _logsumexp(x):
    return _forward(x)


def _logsumexp_fwd(x):
    lse = _forward(x)
    # Residuals: x is the input itself (no copy); lse is one value per row, and the backward
    # turns it into softmax with one exp per element instead of recomputing the row sums.
    return lse, (x, lse)


def _logsumexp_bwd(residuals, cotangent):
    x, lse = residuals
    return (_backward(x, lse, cotangent),)


_logsumexp.defvjp(_logsumexp_fwd, _logsumexp_bwd)


# --------------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------------


def logsumexp_reference(x):
    """Plain JAX, differentiated by JAX's own autodiff."""
    return jax.nn.logsumexp(x, axis=-1)


def logsumexp_numpy(x, cotangent):
    """Independent float64 NumPy value and VJP, with jax.nn.logsumexp's handling of +-inf."""
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(cotangent, dtype=np.float64)
    row_max = x.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    lse = row_max[..., 0] + np.log(np.exp(x - row_max).sum(axis=-1))
    return lse, g[..., None] * np.exp(x - lse[..., None])


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

_failures = []
_count = 0

# rtol and atol in units of the dtype's eps; atol is also scaled by max(1, |x|) * max(1, |g|),
# since rounding x - lse costs about eps * |x| absolutely (in the value and inside exp).
TOLERANCE_IN_EPS = {np.float32: 8.0, np.float64: 8.0}


def report(name, ok, detail=""):
    global _count
    _count += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def check_close(name, actual, expected, rtol, atol):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        report(name, False, f"shape {actual.shape}, expected {expected.shape}")
        return
    err = np.abs(actual - expected)
    ok = bool(np.all(err <= atol + rtol * np.abs(expected)))
    worst = f"{err.max():.2e}" if err.size else "n/a"
    report(name, ok, f"max abs err {worst}, rtol {rtol:.0e}, atol {atol:.1e}")


def check_raises(name, exc_type, match, fn, *args):
    """fn(*args) must raise exc_type with every string of `match` in its message."""
    try:
        jax.block_until_ready(fn(*args))
    except exc_type as e:
        message = str(e)
        missing = [m for m in match if m not in message]
        detail = message.strip().splitlines()[0][:110] if message.strip() else ""
        report(name, not missing, f"missing {missing} in: {message[:200]}" if missing else detail)
    except Exception as e:  # a wrong exception type is a failed check, not a crash
        report(name, False, f"expected {exc_type.__name__}, got {type(e).__name__}: {e}")
    else:
        report(name, False, f"expected {exc_type.__name__}, nothing raised")


def tolerances(dtype, x, g):
    eps = float(np.finfo(dtype).eps)
    k = TOLERANCE_IN_EPS[dtype]
    finite = np.abs(np.asarray(x, np.float64)[np.isfinite(x)])
    scale = max(1.0, float(finite.max(initial=0.0))) * max(1.0, float(np.abs(g).max(initial=0)))
    return k * eps, k * eps * scale


def make_case(rng, shape, dtype, kind):
    """Random x of `shape` and a cotangent of shape[:-1]."""
    x = 3.0 * rng.standard_normal(shape)
    if kind == "shifted":  # rows shifted by +-1e4: a naive exp(x) overflows
        x += 1e4 * rng.choice([-1.0, 1.0], size=(*shape[:-1], 1))
    elif kind == "masked":  # -inf entries (attention-style masking), never a whole row
        mask = rng.random(shape) < 0.4
        mask[..., 0] = False
        x = np.where(mask, -np.inf, x)
    g = rng.standard_normal(shape[:-1])
    return x.astype(dtype), np.asarray(g, dtype=dtype)


def value_and_vjp(fn, x, g):
    value, vjp_fn = jax.vjp(fn, x)
    (grad,) = vjp_fn(g)
    return value, grad


CASES = [
    # (shape, kind)
    ((7, 33), "normal"),
    ((5, 1), "normal"),  # size-1 rows: lse == x, gradient == g
    ((2, 3, 4, 17), "normal"),  # multi-dim batch
    ((50,), "normal"),  # rank 1: one row, a scalar result
    ((6, 1000), "shifted"),
    ((4, 9), "masked"),
]


def check_reference(rng):
    print("-- the plain-JAX reference vs float64 NumPy")
    for dtype in DTYPES:
        for shape, kind in CASES:
            x, g = make_case(rng, shape, dtype, kind)
            rtol, atol = tolerances(dtype, x, g)
            value, grad = value_and_vjp(logsumexp_reference, x, g)
            np_value, np_grad = logsumexp_numpy(x, g)
            tag = f"{np.dtype(dtype).name} {shape} {kind}"
            check_close(f"{tag}: reference value vs numpy", value, np_value, rtol, atol)
            check_close(f"{tag}: reference grad vs numpy", grad, np_grad, rtol, atol)


def check_values_and_grads(rng):
    print("-- the FFI op: values and gradients vs the reference and float64 NumPy")
    for dtype in DTYPES:
        for shape, kind in CASES:
            x, g = make_case(rng, shape, dtype, kind)
            tag = f"{np.dtype(dtype).name} {shape} {kind}"
            if kind == "shifted":
                with np.errstate(over="ignore"):
                    overflows = bool(np.isinf(np.exp(x.astype(np.float64))).any())
                report(f"{tag}: a naive exp(x) overflows here", overflows)
            rtol, atol = tolerances(dtype, x, g)
            value, grad = value_and_vjp(logsumexp, x, g)
            ref_value, ref_grad = value_and_vjp(logsumexp_reference, x, g)
            np_value, np_grad = logsumexp_numpy(x, g)
            report(
                f"{tag}: dtypes and shapes",
                value.dtype == dtype
                and grad.dtype == dtype
                and value.shape == shape[:-1]
                and grad.shape == shape,
            )
            report(f"{tag}: finite", bool(np.isfinite(value).all() and np.isfinite(grad).all()))
            check_close(f"{tag}: value vs reference", value, ref_value, rtol, atol)
            check_close(f"{tag}: value vs numpy", value, np_value, rtol, atol)
            check_close(f"{tag}: grad vs reference", grad, ref_grad, rtol, atol)
            check_close(f"{tag}: grad vs numpy", grad, np_grad, rtol, atol)


def check_transforms(rng):
    print("-- jit, vmap, grad, check_grads (float64)")
    x, g = make_case(rng, (6, 13), np.float64, "normal")
    rtol, atol = tolerances(np.float64, x, g)
    value, grad = value_and_vjp(logsumexp, x, g)

    hlo = jax.jit(logsumexp).lower(x).as_text()
    report("jit lowers to a custom call to the forward target", FORWARD in hlo)
    check_close("jit: value matches eager", jax.jit(logsumexp)(x), value, 1e-15, 0.0)

    def loss(fn):
        return lambda x: jnp.sum(g * jnp.tanh(fn(x)))  # the op inside a bigger function

    check_close(
        "jit(grad) of a composite vs reference grad",
        jax.jit(jax.grad(loss(logsumexp)))(x),
        jax.grad(loss(logsumexp_reference))(x),
        rtol,
        atol,
    )

    batch = np.stack([x, 2.0 * x, -x, x[::-1]])
    np_batch = [logsumexp_numpy(b, g) for b in batch]
    check_close(
        "vmap over axis 0 vs numpy",
        jax.vmap(logsumexp)(batch),
        np.stack([v for v, _ in np_batch]),
        rtol,
        atol,
    )
    # The batch axis in the middle: broadcast_all moves it to the front before the handler.
    check_close(
        "vmap over axis 1 vs numpy",
        jax.vmap(logsumexp, in_axes=1)(batch.transpose(1, 0, 2)),
        np.stack([v for v, _ in np_batch]),
        rtol,
        atol,
    )
    check_close(
        "vmap(grad) vs numpy",
        jax.vmap(jax.grad(lambda x: jnp.sum(g * logsumexp(x))))(batch),
        np.stack([d for _, d in np_batch]),
        rtol,
        atol,
    )
    check_close(
        "grad vs reference grad",
        jax.grad(lambda x: jnp.sum(g * logsumexp(x)))(x),
        jax.grad(lambda x: jnp.sum(g * logsumexp_reference(x)))(x),
        rtol,
        atol,
    )
    check_close("eager vjp vs numpy", grad, logsumexp_numpy(x, g)[1], rtol, atol)
    # Finite differences against the handlers: reverse mode only (custom_vjp).
    try:
        check_grads(loss(logsumexp), (x,), order=1, modes=["rev"])
        report("check_grads(order=1, modes=['rev']) in float64", True)
    except AssertionError as e:
        report("check_grads(order=1, modes=['rev']) in float64", False, str(e)[:200])
    check_raises(
        "forward mode (jvp) is refused",
        TypeError,
        ["can't apply forward-mode autodiff"],
        jax.jvp,
        logsumexp,
        (x,),
        (x,),
    )


def check_export(rng):
    print("-- jax.export")
    x, _ = make_case(rng, (3, 8), np.float32, "normal")
    f = jax.jit(lambda x: jnp.tanh(logsumexp(x)))
    check_raises(
        "export refuses the custom call by default",
        ValueError,
        ["custom call"],
        lambda: export.export(f)(x),
    )
    allow = [export.DisabledSafetyCheck.custom_call(FORWARD)]
    exported = export.export(f, disabled_checks=allow)(x)
    report("with DisabledSafetyCheck.custom_call it exports", FORWARD in exported.mlir_module())
    rtol, atol = tolerances(np.float32, x, np.ones(3))
    expected = np.tanh(logsumexp_numpy(x, np.ones(3))[0])
    check_close(
        "the exported function runs (target registered here)",
        exported.call(x),
        expected,
        rtol,
        atol,
    )


def check_bad_inputs(rng):
    print("-- bad inputs: the handler's errors")
    error = jax.errors.JaxRuntimeError
    x, g = make_case(rng, (4, 8), np.float64, "normal")
    fwd, bwd = "logsumexp_fwd", "logsumexp_bwd"
    bad_calls = [
        ("int32 x", [fwd, "unsupported dtype int32"], logsumexp, x.astype(np.int32)),
        ("float16 x", [fwd, "unsupported dtype float16"], logsumexp, x.astype(np.float16)),
        ("rank-0 x", [fwd, "rank >= 1"], logsumexp, np.float64(1.0)),
        ("rows of length 0", [fwd, "rows of length 0", "(4, 0)"], logsumexp, x[:, :0]),
        ("jit, int32 x", [fwd, "unsupported dtype int32"], jax.jit(logsumexp), x.astype(np.int32)),
    ]
    for name, match, fn, arg in bad_calls:
        check_raises(name, error, match, fn, arg)

    # Wrong result declarations pass XLA unchecked; only the handler's checks catch them.
    def call(target, result, *args):
        return lambda: jax.ffi.ffi_call(target, result)(*args)

    lse = np.zeros(4)
    wrong = [
        (
            "declared lse shape (5,)",
            [fwd, "output lse has shape (5,), expected (4,)"],
            call(FORWARD, jax.ShapeDtypeStruct((5,), np.float64), x),
        ),
        (
            "declared lse dtype float32",
            [fwd, "output lse has dtype float32, expected float64"],
            call(FORWARD, jax.ShapeDtypeStruct((4,), np.float32), x),
        ),
        (
            "declared dx shape (4, 9)",
            [bwd, "output dx has shape (4, 9), expected (4, 8)"],
            call(BACKWARD, jax.ShapeDtypeStruct((4, 9), np.float64), x, lse, g),
        ),
        (
            "cotangent shape (3,)",
            [bwd, "cotangent has shape (3,), expected (4,)"],
            call(BACKWARD, jax.ShapeDtypeStruct(x.shape, x.dtype), x, lse, g[:3]),
        ),
        (
            "lse dtype float32",
            [bwd, "input lse has dtype float32, expected float64"],
            call(BACKWARD, jax.ShapeDtypeStruct(x.shape, x.dtype), x, lse.astype(np.float32), g),
        ),
    ]
    for name, match, fn in wrong:
        check_raises(name, error, match, fn)

    value = logsumexp(x)
    check_close(
        "the process is still usable after the errors",
        value,
        logsumexp_numpy(x, g)[0],
        1e-14,
        1e-14,
    )


def main():
    start = time.perf_counter()
    print(f"jax {jax.__version__} on {jax.default_backend()}")
    try:
        build_and_register()
    except NoCompilerError as e:
        print(
            f"ERROR: {e}. This asset compiles {SOURCE.name} and cannot check anything without a "
            "compiler.",
            file=sys.stderr,
        )
        sys.exit(2)
    except BuildError as e:
        print(f"ERROR: compiling {SOURCE.name} failed:\n{e}", file=sys.stderr)
        sys.exit(1)
    print(f"built and registered {', '.join(SYMBOLS)} in {time.perf_counter() - start:.1f} s")
    rng = np.random.default_rng(0)
    check_reference(rng)
    check_values_and_grads(rng)
    check_transforms(rng)
    check_export(rng)
    check_bad_inputs(rng)
    elapsed = time.perf_counter() - start
    if _failures:
        print(f"\n{len(_failures)} of {_count} check(s) FAILED ({elapsed:.1f} s): {_failures}")
        sys.exit(1)
    print(f"\nall {_count} checks passed ({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
