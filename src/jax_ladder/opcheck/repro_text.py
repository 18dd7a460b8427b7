"""The text every standalone repro script shares (repro.py writes the rest:
its docstring, the failing inputs as literals and main(), which runs what
the cell ran): imports, the float64 oracle on the CPU, the comparison
within the declared tolerance (compare.py's bound, per element), and the
checks of what else a cell holds results to (their abstract result, the
same bits twice, no input consumed). Plain JAX and NumPy: the script runs
without jax_ladder.
"""

PRELUDE = '''import sys
import traceback

import jax

jax.config.update("jax_enable_x64", True)  # as the cells run: the oracle in float64

import jax.numpy as jnp
import numpy as np

{imports}

nan, inf = float("nan"), float("inf")
CPU = jax.devices("cpu")[0]
# ulps of the accumulator (float32 for a half-precision result): (at each
# value, at the largest |value|), as declared (compare.py in jax_ladder)
TOLERANCE = {tolerance}
GRADIENT_TOLERANCE = {gradient}
DIFF_ARGS = {diff_args}  # the differentiated arguments (of {names})
DIFF_OUTPUTS = {diff_outputs}  # the outputs the cotangents weight (None: the floating ones)


def outputs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def floating(a):
    return jnp.issubdtype(np.asarray(a).dtype, jnp.inexact)


def on_cpu64(a):
    a = np.asarray(a)
    return jax.device_put(a.astype(np.float64) if floating(a) else a, CPU)


def oracle(args):
    """The float64 results, on the CPU: the declared oracle, else the reference."""
    if declared_oracle is not None:
        results = declared_oracle(*[np.asarray(on_cpu64(a)) for a in args])
    else:
        with jax.default_device(CPU):
            results = reference(*[on_cpu64(a) for a in args])
    return tuple(np.asarray(o) for o in outputs(results))


def loss(fn, cotangents):
    """sum of cotangent * output over the differentiable outputs."""

    def weighted(*args):
        outs = outputs(fn(*args))
        picked = DIFF_OUTPUTS
        if picked is None:
            picked = [i for i, o in enumerate(outs) if jnp.issubdtype(o.dtype, jnp.inexact)]
        return sum(jnp.sum(c * outs[i]) for c, i in zip(cotangents, picked))

    return weighted


def gradient_oracle(args, cotangents):
    """The float64 gradients of each differentiated argument, on the CPU."""
    if declared_gradient_oracle is not None:
        as64 = [np.asarray(on_cpu64(a)) for a in [*args, *cotangents]]
        return [np.asarray(g) for g in declared_gradient_oracle(*as64)]
    with jax.default_device(CPU):
        cts = [on_cpu64(c) for c in cotangents]
        grads = jax.grad(loss(reference, cts), argnums=DIFF_ARGS)(*[on_cpu64(a) for a in args])
    return [np.asarray(g) for g in grads]


def spacing(dtype, value):
    """The ulp of dtype at |value| (at least its smallest normal's)."""
    info = jnp.finfo(dtype)
    magnitude = np.maximum(np.abs(np.asarray(value, np.float64)), float(info.smallest_normal))
    return np.ldexp(float(info.eps), np.frexp(magnitude)[1] - 1)


def compare(what, got, want, tolerance, scale=0.0):
    """Each element of got within the tolerance of want; prints the worst."""
    dtype = jnp.dtype(got.dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        got = np.asarray(got)
        real = compare(f"{{what}}, real part", np.real(got), np.real(want), tolerance, scale)
        imag = compare(f"{{what}}, imaginary part", np.imag(got), np.imag(want), tolerance, scale)
        return real and imag
    if not jnp.issubdtype(dtype, jnp.floating):
        ok = np.array_equal(np.asarray(got), np.asarray(want))
        print(f"{{what}}: {{'equal' if ok else 'NOT EQUAL'}} (exact, {{dtype}})")
        return ok
    accumulator = jnp.promote_types(dtype, jnp.float32)
    roundings = 0 if accumulator == dtype else 1 + (np.asarray(want).dtype == dtype)
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        print(f"{{what}}: shape {{got.shape}}, the oracle's {{want.shape}}")
        return False
    both_nan = np.isnan(got) & np.isnan(want)
    nonfinite = (~np.isfinite(got) | ~np.isfinite(want)) & ~both_nan & (got != want)
    if nonfinite.any():
        i = tuple(int(j) for j in np.argwhere(nonfinite)[0])
        print(
            f"{{what}}: FAILS: got {{float(got[i])!r}}, want {{float(want[i])!r}} at index {{i}}: "
            "a non-finite value must be the oracle's exactly"
        )
        return False
    finite = np.isfinite(want)
    got, want = np.where(finite, got, 0.0), np.where(finite, want, 0.0)
    largest = float(np.max(np.abs(want), initial=0.0))
    at = np.full(want.shape, scale) if largest == 0.0 and scale > 0 else want
    largest = largest or scale
    at_value, at_scale, at_inputs = tolerance
    bound = (
        0.5 * roundings * spacing(dtype, want)
        + at_value * spacing(accumulator, at)
        + at_scale * spacing(accumulator, largest)
        + at_inputs * spacing(accumulator, scale)
        + (at_value + at_scale + at_inputs) * float(jnp.finfo(accumulator).smallest_normal)
    )
    bound = np.maximum(bound, np.finfo(np.float64).tiny)
    error = np.abs(got - want)
    if not error.size:
        return True
    i = np.unravel_index(int(np.argmax(error / bound)), error.shape)
    ok = bool(error[i] <= bound[i])
    ulps = error[i] / spacing(dtype, at[i])
    print(
        f"{{what}}: {{'ok' if ok else 'FAILS'}}: worst error {{error[i]:.3g}} "
        f"({{ulps:.3g}} ulps of {{dtype}}) at index {{tuple(int(j) for j in i)}}, "
        f"allowed {{bound[i]:.3g}}: got {{float(got[i])!r}}, want {{float(want[i])!r}}; "
        f"max abs error {{error.max():.3g}}"
    )
    return ok


def scale_of(args):
    """The largest finite |value| of the floating inputs (an all-zero oracle's scale)."""
    values = [np.asarray(a, np.float64) for a in args if floating(a)]
    sizes = [float(np.max(np.abs(v), initial=0.0, where=np.isfinite(v))) for v in values]
    return max(sizes, default=0.0)


def compare_all(where, got, want, tolerance, scale, names=None):
    ok = True
    got = list(got)
    assert len(got) == len(want), f"{{where}}: {{len(got)}} results, the oracle's {{len(want)}}"
    for k, (g, w) in enumerate(zip(got, want)):
        what = f"gradient of {{names[k]}}" if names else f"output {{k}}"
        ok &= compare(f"{{where}}, {{what}}", g, w, tolerance, scale)
    return ok


'''

# The eager and jit cells hold results to more than the oracle's values:
# their abstract result, the same bits on a second run, no input consumed.
CHECKS = '''

def as_declared(where, fn, args):
    """fn(*args), each result the shape and dtype jax.eval_shape gives for
    the same call."""
    got = fn(*args)
    declared = jax.eval_shape(fn, *args)
    mine, theirs = jax.tree.leaves(got), jax.tree.leaves(declared)
    if len(mine) != len(theirs):
        print(f"{where}: {len(mine)} results, the abstract result (jax.eval_shape) {len(theirs)}")
        return got, False
    ok = True
    for k, (g, d) in enumerate(zip(mine, theirs)):
        computed = f"{jnp.dtype(np.asarray(g).dtype)}{list(np.shape(g))}"
        abstract = f"{jnp.dtype(d.dtype)}{list(d.shape)}"
        same = computed == abstract
        print(
            f"{where}, result {k}: {'ok' if same else 'FAILS'}: computed {computed}, "
            f"its abstract result (jax.eval_shape of the same call) {abstract}"
        )
        ok &= same
    return got, ok


def as_reference(args):
    """The op's abstract result is the reference's."""
    shapes = [
        [f"{jnp.dtype(o.dtype)}{list(o.shape)}" for o in outputs(jax.eval_shape(f, *args))]
        for f in (op, reference)
    ]
    same = shapes[0] == shapes[1]
    print(
        f"the op's abstract result {shapes[0]}: {'ok' if same else 'FAILS'}: "
        f"the reference's {shapes[1]}"
    )
    return same


def none_consumed(where, args):
    gone = [i for i, a in enumerate(args) if a.is_deleted()]
    if gone:
        print(f"{where}: FAILS: arguments {gone} consumed (deleted), though not donated")
    return not gone


def same_bits(where, first, second):
    """Two runs on the same inputs give the same bits (NaN == NaN, -0.0 != 0.0)."""
    if jax.default_backend() in NONDETERMINISTIC:
        return True
    ok = True
    for k, (a, b) in enumerate(zip(jax.tree.leaves(first), jax.tree.leaves(second))):
        a, b = np.asarray(a), np.asarray(b)
        size = a.size
        a, b = (x.reshape(-1).view(np.uint8).reshape(size, -1) for x in (a, b))
        differ = int(np.count_nonzero((a != b).any(axis=1))) if size else 0
        print(
            f"{where}, result {k}: {'ok' if not differ else 'FAILS'}: {differ} of {size} "
            "elements differ between two runs on the same inputs"
        )
        ok &= not differ
    return ok
'''

MAIN = """

if __name__ == "__main__":
    try:
        ok = main()
    except Exception as error:
        if type(error).__name__ != RAISED:
            raise
        traceback.print_exc()
        print(f"reproduced: it raised {RAISED}, as the cell did")
        sys.exit(1)
    if ok:
        print("not reproduced: every check passed")
    else:
        print("reproduced: a check failed")
    sys.exit(0 if ok else 1)
"""


FLUSHED = '''def flushed(args):
    """Subnormal values as zeros of their sign: XLA's CPU may read them so."""
    out = []
    for a in args:
        if jnp.issubdtype(a.dtype, jnp.floating):
            v = np.asarray(a, np.float64)
            small = np.abs(v) < float(jnp.finfo(a.dtype).smallest_normal)
            a = np.asarray(np.where(small, np.copysign(0.0, v), v)).astype(a.dtype)
        out.append(a)
    return out
'''
