"""Stage a JAX computation with ``jax.export``: export once, ship the bytes, call them later.

What it does: exports ``predict`` (kernel ridge / Gaussian-process mean prediction with an RBF
kernel) with two symbolic dimensions, n query points and m training points, for CPU, CUDA and
TPU at once, serializes it with its first-order VJP, and writes the bytes plus a small JSON
manifest (SHA-256, export constraints, versions). Any process with a compatible jax/jaxlib can
then ``export.deserialize`` the bytes and call or differentiate the function without this
source file. ``load`` and ``checked_call`` are the few lines of serving code that turn JAX's
unclear failures (a truncated blob, a violated shape constraint) into errors that say what is
wrong.

    predict(x_query (n, D), x_train (m, D), alpha (m,)) -> (n,)
    out[i] = sum_j alpha[j] * exp(-|x_query[i] - x_train[j]|^2 / (2 LENGTHSCALE^2))

The kernel matrix is (n, m); for big training sets that does not fit, so ``predict`` streams
over the training set in windows of CHUNK rows and never holds more than (n, CHUNK) of it. A
fixed-size window only exists when m >= CHUNK, and JAX cannot prove that for a symbolic m:
exporting without the constraint ``m >= CHUNK`` fails (``main()`` checks this). Callers with
fewer than CHUNK training points are rejected when the call is compiled, and ``checked_call``
rejects them by name before that.

When to export rather than ``jax.jit`` plus the persistent compilation cache: the cache only
speeds up a process that still has the Python source and the same jax/jaxlib and hardware; it
is a cache, not an artifact. Export when the caller must not need your code (a serving binary,
another team, a model registry), must keep working across jax upgrades (the serialized form is
versioned, see the calling convention version printed below, and a newer jax keeps loading
artifacts written by jax releases up to six months older: JAX guarantees at least six months
of backward compatibility), or when you want one artifact for several platforms and for every
size of the symbolic dimensions. The artifact is StableHLO, not machine code: the loading
process compiles it on the first call for each shape.

To adapt: replace ``predict`` (plain JAX, jit-able), ``D``/``DTYPE``/``CHUNK``/``LENGTHSCALE``,
the symbolic shape specs in ``export_predict``, ``CONSTRAINTS``, ``predict_numpy`` and
``predict_vjp_numpy`` (independent float64 oracles), ``CASES`` and the bad inputs in
``check_failures``. Keep ``save``,
``load`` and ``checked_call``. Run ``python kernel_ridge_export.py``; it exits non-zero on failure.

The deserialized function is trusted code: calling it runs whatever custom calls it contains.
Only load artifacts you (or your pipeline) wrote; the SHA-256 catches corruption, not attacks.
"""

import hashlib
import json
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

# --------------------------------------------------------------------------------------------
# The function
# --------------------------------------------------------------------------------------------

D = 4  # feature dimension: static, part of the exported signature
DTYPE = np.float32
LENGTHSCALE = 1.5  # a fitted hyperparameter, baked into the artifact as a constant
# Training rows per window: the kernel block is (n, CHUNK). Production values are 1024-8192;
# the self-check uses a small one so that sizes around the window boundary are cheap.
CHUNK = 32


def predict(x_query, x_train, alpha):
    """RBF kernel prediction ``K(x_query, x_train) @ alpha``, CHUNK training rows at a time."""
    m = x_train.shape[0]  # an int when called directly, a symbolic dimension under export
    # A derived dimension: ceil(m / CHUNK) windows. It is symbolic too, so scan handles it.
    num_windows = (m + CHUNK - 1) // CHUNK

    def add_window(acc, w):
        start = w * CHUNK
        # dynamic_slice keeps the window in bounds by moving it back: the last window starts
        # at m - CHUNK and overlaps the previous one. Slicing instead of padding x_train to a
        # multiple of CHUNK avoids copying the whole training set. It needs m >= CHUNK.
        x_win = jax.lax.dynamic_slice_in_dim(x_train, start, CHUNK)
        a_win = jax.lax.dynamic_slice_in_dim(alpha, start, CHUNK)
        first_row = jnp.minimum(start, m - CHUNK)
        already_counted = first_row + jnp.arange(CHUNK) < start
        a_win = jnp.where(already_counted, 0, a_win)
        # Squared distances from differences, not |a|^2 + |b|^2 - 2ab: the matmul form cancels
        # catastrophically in float32 for nearby points. The (n, CHUNK, D) block is bounded.
        sq_dist = jnp.sum((x_query[:, None, :] - x_win[None, :, :]) ** 2, axis=-1)
        kernel = jnp.exp(sq_dist * (-0.5 / LENGTHSCALE**2))
        return acc + kernel @ a_win, None

    out, _ = jax.lax.scan(
        add_window, jnp.zeros(x_query.shape[:1], x_query.dtype), jnp.arange(num_windows)
    )
    return out


# --------------------------------------------------------------------------------------------
# Export, save, load, call
# --------------------------------------------------------------------------------------------

PLATFORMS = ("cpu", "cuda", "tpu")  # all lower on a CPU-only machine; no GPU/TPU needed
CONSTRAINTS = (f"m >= {CHUNK}",)  # the form "dim >= int", "dim <= int" or "dim == dim"


def export_predict(platforms=PLATFORMS, constraints=CONSTRAINTS):
    # One scope for n and m: symbolic dimensions from different scopes cannot be combined, and
    # the constraints live in the scope.
    scope = export.SymbolicScope(constraints)
    n, m = export.symbolic_shape("n, m", scope=scope)
    specs = (
        jax.ShapeDtypeStruct((n, D), DTYPE),  # x_query
        jax.ShapeDtypeStruct((m, D), DTYPE),  # x_train: same m as alpha, checked at call time
        jax.ShapeDtypeStruct((m,), DTYPE),  # alpha
    )
    return export.export(jax.jit(predict), platforms=platforms)(*specs)


def save(exported, path, constraints=CONSTRAINTS, vjp_order=1):
    """Write the serialized function to ``path`` and a manifest to ``path.json``.

    ``constraints`` must be the ones ``exported`` was exported with. vjp_order=1 also
    serializes the exported VJP, so the loader can take one jax.grad (2 for grad of grad).
    Without it the artifact is smaller and only callable, not differentiable.
    """
    path = Path(path)
    blob = bytes(exported.serialize(vjp_order=vjp_order))
    for c in constraints:
        _parse_constraint(c)  # fail at export time, not in the server, if the loader can't check
    manifest = {
        "function": exported.fun_name,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "size": len(blob),
        # jax 0.12 does not serialize the scope's constraints (jax/_src/export/serialization.py
        # deserializes into an empty SymbolicScope), so the loader learns them from here.
        "constraints": list(constraints),
        "in_avals": [str(a) for a in exported.in_avals],  # e.g. float32[n,4]
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "vjp_order": vjp_order,
        "jax_version": jax.__version__,
    }
    path.write_bytes(blob)
    _manifest_path(path).write_text(json.dumps(manifest, indent=1))
    return manifest


def load(path):
    """Read, verify and deserialize an artifact written by ``save``: (exported, manifest)."""
    path = Path(path)
    blob = path.read_bytes()
    manifest = json.loads(_manifest_path(path).read_text())
    # Flatbuffers do not validate themselves: a truncated blob fails with struct.error, and a
    # flipped byte may deserialize into a different program. The hash catches both.
    if len(blob) != manifest["size"]:
        raise ValueError(
            f"{path}: artifact is truncated: {len(blob)} bytes, manifest says {manifest['size']}"
        )
    if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
        raise ValueError(f"{path}: artifact is corrupted: its SHA-256 does not match the manifest")
    return export.deserialize(bytearray(blob)), manifest


def checked_call(exported, manifest, *args):
    """``exported.call(*args)``, after checking the export constraints by name.

    JAX checks ranks, dtypes, static dimensions and shared dimensions itself, with clear
    messages. A violated scope constraint only fails when the call is compiled, as "Error
    refining shapes", so check those here first.
    """
    sizes = {}  # dimension name -> (size, where it came from)
    for i, (aval, arg) in enumerate(zip(exported.in_avals, jax.tree.leaves(args), strict=False)):
        if np.ndim(arg) != len(aval.shape):
            continue  # JAX's rank check will name it
        for axis, (dim, size) in enumerate(zip(aval.shape, np.shape(arg), strict=True)):
            if export.is_symbolic_dim(dim) and str(dim).isidentifier():
                sizes.setdefault(str(dim), (size, f"args[{i}].shape[{axis}]"))
    for constraint in manifest["constraints"]:
        lhs, op, rhs = _parse_constraint(constraint)
        if any(not s.isdigit() and s not in sizes for s in (lhs, rhs)):
            continue  # a dimension of a wrong-rank argument: JAX will report the rank
        values = [sizes[s][0] if s in sizes else int(s) for s in (lhs, rhs)]
        if not _COMPARE[op](*values):
            bound = ", ".join(
                f"{s} = {sizes[s][0]} ({sizes[s][1]})" for s in (lhs, rhs) if s in sizes
            )
            raise ValueError(
                f"{exported.fun_name}: called with {bound}, which violates the export "
                f"constraint {constraint!r}"
            )
    return exported.call(*args)


_COMPARE = {">=": int.__ge__, "<=": int.__le__, "==": int.__eq__}


def _parse_constraint(constraint):
    match = re.fullmatch(r"\s*(\w+)\s*(>=|<=|==)\s*(\w+)\s*", constraint)
    if match is None:
        raise NotImplementedError(f"checked_call cannot evaluate constraint {constraint!r}")
    return match.groups()


def _manifest_path(path):
    return path.with_name(path.name + ".json")


# --------------------------------------------------------------------------------------------
# Independent float64 oracles
# --------------------------------------------------------------------------------------------


def _kernel_terms(x_query, x_train):
    diff = np.asarray(x_query, np.float64)[:, None, :] - np.asarray(x_train, np.float64)[None]
    scaled_sq_dist = (diff**2).sum(axis=-1) / LENGTHSCALE**2
    # Error model for a float32 result: a kernel value is off by ~eps * (1 + scaled_sq_dist)
    # relative (the distance is rounded, then exponentiated), and summing adds ~eps per term.
    return diff, np.exp(-0.5 * scaled_sq_dist), 1.0 + scaled_sq_dist


def predict_numpy(x_query, x_train, alpha):
    """Dense float64 prediction, and for each output the scale of its float32 rounding error."""
    _, kernel, growth = _kernel_terms(x_query, x_train)
    terms = kernel * np.asarray(alpha, np.float64)
    return terms.sum(axis=1), (np.abs(terms) * growth).sum(axis=1)


def predict_vjp_numpy(x_query, x_train, alpha, cotangent):
    """Hand-derived float64 gradients of sum(cotangent * predict), with error scales."""
    diff, kernel, growth = _kernel_terms(x_query, x_train)
    alpha, cotangent = np.asarray(alpha, np.float64), np.asarray(cotangent, np.float64)
    # d out_i / d x_query_i = -sum_j alpha_j k_ij (x_query_i - x_train_j) / LENGTHSCALE^2
    w = cotangent[:, None] * kernel * alpha[None, :] / LENGTHSCALE**2
    w_abs = np.abs(w) * growth
    grads = (
        -np.einsum("ij,ijk->ik", w, diff),
        np.einsum("ij,ijk->jk", w, diff),
        (cotangent[:, None] * kernel).sum(axis=0),
    )
    scales = (
        np.einsum("ij,ijk->ik", w_abs, np.abs(diff)),
        np.einsum("ij,ijk->jk", w_abs, np.abs(diff)),
        (np.abs(cotangent[:, None] * kernel) * growth).sum(axis=0),
    )
    return grads, scales


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

# Run in a fresh interpreter: only jax, numpy and the artifact, nothing from this file.
CHILD_SCRIPT = """
import hashlib, json, sys
from pathlib import Path
import numpy as np
from jax import export

artifact, inputs, outputs = map(Path, sys.argv[1:4])
blob = artifact.read_bytes()
manifest = json.loads(Path(str(artifact) + ".json").read_text())
if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
    sys.exit("artifact corrupted")
exported = export.deserialize(bytearray(blob))
cases = np.load(inputs)
results = {}
for i in range(int(cases["num_cases"])):
    args = (cases[f"x_query_{i}"], cases[f"x_train_{i}"], cases[f"alpha_{i}"])
    results[f"out_{i}"] = np.asarray(exported.call(*args))
np.savez(outputs, **results)
print(f"child: deserialized {exported.fun_name}{exported.in_avals}, called it on "
      f"{len(results)} cases")
"""

# Tolerances in units of eps * (error scale from the oracle). The self-check prints the worst
# case in these units; the margin above it is for other summation orders.
VALUE_TOL = 4
GRAD_TOL = 8
# (n, m) cases: n = 1 and the window boundary m = CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1.
CASES = ((1, CHUNK), (2, CHUNK + 1), (7, 2 * CHUNK), (1, 2 * CHUNK + 1), (100, 5 * CHUNK - 3))

_failures = []


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def check_close(name, actual, expected, scale, tol):
    """|actual - expected| <= tol * eps * scale, elementwise."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    err = np.abs(actual - expected)
    bound = tol * np.finfo(DTYPE).eps * np.asarray(scale, np.float64)
    ok = actual.shape == expected.shape and bool(np.all(err <= bound))
    worst = float(np.max(err / np.maximum(bound / tol, np.finfo(np.float64).tiny)))
    report(name, ok, f"max err {err.max():.1e} = {worst:.2f} of {tol} eps-scale units")


def _first_line(e):
    kind = type(e).__qualname__
    if type(e).__module__ != "builtins":
        kind = f"{type(e).__module__}.{kind}"
    return f"{kind}: {(str(e).splitlines() or [''])[0]}"


def _message(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return _first_line(e)
    return None


def check_raises(name, exc_type, match, fn, *args):
    """fn(*args) must raise exc_type with ``match`` in its message. Prints its first line."""
    try:
        fn(*args)
    except Exception as e:  # any other exception is a failed check, not a crash
        ok = isinstance(e, exc_type) and match in str(e)
        report(name, ok, f"expected {exc_type.__name__} with {match!r}" if not ok else "")
        print(f"       {_first_line(e)}")
    else:
        report(name, False, f"expected {exc_type.__name__}, nothing raised")


def make_case(rng, n, m):
    x_query = rng.standard_normal((n, D)).astype(DTYPE)
    x_train = rng.standard_normal((m, D)).astype(DTYPE)
    alpha = rng.standard_normal(m).astype(DTYPE)
    return x_query, x_train, alpha


def check_export_needs_constraint():
    print("-- the constraint is needed")
    # Without "m >= CHUNK" JAX cannot prove a CHUNK-row window fits in m rows.
    check_raises(
        "export without the constraint fails",
        Exception,
        f"'m' >= '{CHUNK}' is inconclusive",
        export_predict,
        PLATFORMS,
        (),
    )


def check_round_trip(exported, cases):
    print(f"-- round trip at (n, m) = {[(len(c[0]), len(c[1])) for c in cases]}")
    jit_predict = jax.jit(predict)
    results = []
    for x_query, x_train, alpha in cases:
        tag = f"n={len(x_query)}, m={len(x_train)}"
        out = exported.call(x_query, x_train, alpha)
        expected, scale = predict_numpy(x_query, x_train, alpha)
        report(f"{tag}: shape and dtype", out.shape == (len(x_query),) and out.dtype == DTYPE)
        check_close(f"{tag}: vs plain JAX", out, jit_predict(x_query, x_train, alpha), scale, 2)
        check_close(f"{tag}: vs float64 NumPy", out, expected, scale, VALUE_TOL)
        results.append(np.asarray(out))
    return results


def check_fresh_process(artifact, cases, results, tmp):
    print("-- a fresh Python process loads the artifact and calls it")
    inputs, outputs = tmp / "inputs.npz", tmp / "outputs.npz"
    arrays = {"num_cases": np.array(len(cases))}
    for i, (x_query, x_train, alpha) in enumerate(cases):
        arrays |= {f"x_query_{i}": x_query, f"x_train_{i}": x_train, f"alpha_{i}": alpha}
    np.savez(inputs, **arrays)
    # cwd=tmp so that this file's directory is not on the child's sys.path.
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_SCRIPT, str(artifact), str(inputs), str(outputs)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print("       " + (proc.stdout.strip() or proc.stderr.strip()[-2000:]))
    report("child process exits 0", proc.returncode == 0, f"rc {proc.returncode}")
    if proc.returncode != 0:
        return
    child = np.load(outputs)
    for i, ((x_query, x_train, _), out) in enumerate(zip(cases, results, strict=True)):
        same = np.array_equal(child[f"out_{i}"], out)
        report(f"n={len(x_query)}, m={len(x_train)}: child result identical to this process", same)


def check_grads(exported, cases, rng):
    print("-- gradients through the deserialized call (uses the serialized VJP)")

    def weighted(fn, cotangent):
        return lambda *args: jnp.vdot(cotangent, fn(*args))

    for x_query, x_train, alpha in cases:
        tag = f"n={len(x_query)}, m={len(x_train)}"
        cotangent = rng.standard_normal(len(x_query)).astype(DTYPE)
        grads = jax.grad(weighted(exported.call, cotangent), argnums=(0, 1, 2))(
            x_query, x_train, alpha
        )
        reference = jax.grad(weighted(predict, cotangent), argnums=(0, 1, 2))(
            x_query, x_train, alpha
        )
        expected, scales = predict_vjp_numpy(x_query, x_train, alpha, cotangent)
        for name, g, r, e, s in zip(
            ("x_query", "x_train", "alpha"), grads, reference, expected, scales, strict=True
        ):
            check_close(f"{tag}: d/d{name} vs grad(predict)", g, r, s, 2)
            check_close(f"{tag}: d/d{name} vs float64 NumPy", g, e, s, GRAD_TOL)


def check_failures(exported, artifact, manifest, tmp, rng):
    print("-- what fails, and how")
    x_query, x_train, alpha = make_case(rng, 5, CHUNK + 3)
    call = exported.call

    # An artifact serialized without its VJP is callable but not differentiable.
    no_vjp = export.deserialize(exported.serialize())
    report("without vjp_order: still callable", no_vjp.call(x_query, x_train, alpha).shape == (5,))
    grad_no_vjp = jax.grad(lambda a: jnp.sum(no_vjp.call(a, x_train, alpha)))
    check_raises("without vjp_order: grad", ValueError, "No VJP is available", grad_no_vjp, x_query)

    # The platforms are fixed at export time; the check happens when the call is lowered.
    cuda_only = export.deserialize(export_predict(platforms=("cuda",)).serialize())
    check_raises(
        "cuda-only artifact called on CPU",
        ValueError,
        "was exported for platforms '('cuda',)' but it is used on '('cpu',)'",
        cuda_only.call,
        x_query,
        x_train,
        alpha,
    )

    # JAX's own checks, run before compiling. Note: with jax_enable_x64 off (the default), a
    # float64 NumPy input is silently converted to float32 and accepted; int32 is not.
    bad_calls = {
        # name: (expected message part, arguments)
        "wrong dtype (x_query int32)": (
            "Dtype mismatch for args[0]",
            (x_query.astype(np.int32), x_train, alpha),
        ),
        "wrong rank (x_query 1-D)": ("Rank mismatch for args[0]", (x_query[0], x_train, alpha)),
        "wrong static dim (D - 1 features)": (
            "Shape mismatch for args[0].shape[1]",
            (x_query[:, 1:], x_train, alpha),
        ),
        "mismatched shared dim (alpha has m - 1 rows)": (
            "Found inconsistency between dimension size args[2].shape[0]",
            (x_query, x_train, alpha[:-1]),
        ),
    }
    for name, (match, args) in bad_calls.items():
        check_raises(name, ValueError, match, call, *args)
    same = [
        _message(call, *args) == _message(checked_call, exported, manifest, *args)
        for _, args in bad_calls.values()
    ]
    report("checked_call leaves JAX's own errors above unchanged", all(same))

    # The constraint m >= CHUNK is only checked when the call is compiled, and says nothing.
    small = (x_query, x_train[: CHUNK - 1], alpha[: CHUNK - 1])
    check_raises(
        "violated constraint (m = CHUNK - 1)", ValueError, "Error refining shapes", call, *small
    )
    check_raises(
        "violated constraint via checked_call",
        ValueError,
        f"m = {CHUNK - 1} (args[1].shape[0]), which violates the export constraint 'm >= {CHUNK}'",
        checked_call,
        exported,
        manifest,
        *small,
    )
    report(
        "checked_call passes good inputs through",
        np.array_equal(
            checked_call(exported, manifest, x_query, x_train, alpha), call(x_query, x_train, alpha)
        ),
    )

    # Corrupt artifacts. Truncated: raw deserialize raises struct.error, which names nothing.
    # One flipped bit: raw deserialize usually succeeds (for 250 of 254 positions tried in
    # this blob) and hands back a different program. load() checks the size and SHA-256.
    blob = artifact.read_bytes()
    truncated = tmp / "truncated.jaxexport"
    truncated.write_bytes(blob[: len(blob) // 2])
    _manifest_path(truncated).write_text(_manifest_path(artifact).read_text())
    check_raises(
        "truncated bytes, raw export.deserialize",
        struct.error,
        "unpack_from",
        export.deserialize,
        bytearray(truncated.read_bytes()),
    )
    check_raises("truncated bytes, load()", ValueError, "artifact is truncated", load, truncated)
    flipped = tmp / "flipped.jaxexport"
    flipped.write_bytes(blob[:100] + bytes([blob[100] ^ 1]) + blob[101:])
    _manifest_path(flipped).write_text(_manifest_path(artifact).read_text())
    raw = _message(export.deserialize, bytearray(flipped.read_bytes())) or "loads, no error"
    print(f"       one flipped bit, raw export.deserialize: {raw}")
    check_raises("one flipped bit, load()", ValueError, "artifact is corrupted", load, flipped)


def main():
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__} on {jax.default_backend()}")
    check_export_needs_constraint()

    exported = export_predict()
    print(f"-- exported {exported.fun_name}: {exported.in_avals} -> {exported.out_avals}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        artifact = tmp / "predict.jaxexport"
        save(exported, artifact, vjp_order=1)
        loaded, manifest = load(artifact)
        size_no_vjp = len(exported.serialize())
        print(
            f"       artifact {manifest['size']:,} bytes with VJP ({size_no_vjp:,} without), "
            f"platforms {loaded.platforms}, calling convention version "
            f"{loaded.calling_convention_version} (this jax reads "
            f"{export.minimum_supported_calling_convention_version}.."
            f"{export.maximum_supported_calling_convention_version})"
        )
        report("loaded artifact has the VJP", loaded.has_vjp())

        cases = [make_case(rng, n, m) for n, m in CASES]
        results = check_round_trip(loaded, cases)
        check_fresh_process(artifact, cases, results, tmp)
        check_grads(loaded, cases[:3], rng)
        check_failures(loaded, artifact, manifest, tmp, rng)

    print(f"\nFAILED checks: {_failures}" if _failures else "\nall checks passed")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
