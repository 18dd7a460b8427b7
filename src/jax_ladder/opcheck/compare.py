"""The comparison every test makes with the float64 oracle, in ulps.

A tolerance is counted in units of the dtype's spacing at the value (ulps):
what rounding can honestly cost, wherever the value lies. An Ulps says, for
one kind of result, how many the op may be off:

- at_value: ulps of the accumulator dtype at each element's oracle value, for
  an op computed in that dtype (float32 for half precision: see below);
- at_scale: ulps of the accumulator dtype at the array's largest |value|, for
  sums whose terms cancel: each term's rounding is the size of the terms, not
  of the small result they leave (the largest |value| stands for the terms'
  size);
- at_inputs: ulps of the accumulator dtype at the inputs' largest |value|,
  for a result much smaller than the terms it is made of, which the result
  itself does not show (a cross-entropy's honest error is on the scale of
  its largest logit, not of the loss).

A half-precision result (bfloat16, float16) computed in float32 and rounded
once may also be off by the half ulp of that final rounding, which every
comparison of such a result allows (and another half ulp where want is a
half-precision result too, such as the reference's); an op that computes in
half precision loses several of its ulps, and fails.

A NaN or an infinity must be the oracle's exactly (NaN, +inf or -inf): no
tolerance makes a NaN of an inf, or -inf of +inf (1/|x| is not 1/x at -0).

A platform whose own arithmetic is not IEEE rounding of each operation (a
TPU's emulated float64; its float32 transcendentals and reductions) declares
what it keeps of the significand in PLATFORM_BITS, measured on that hardware;
every comparison of a result computed there widens its counts by the bits it
loses. The oracle itself always computes on the CPU.

assert_close records the worst element it has seen, as a fraction of its
tolerance; conftest.py prints it at the end of the run, so you can see how
close the tests came to their tolerances. On a platform of PLATFORM_BITS it
also records how far past the IEEE tolerance results went (the measurement
behind each entry).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .devices import default_platform


@dataclass(frozen=True)
class Ulps:
    at_value: float
    at_scale: float = 0.0
    at_inputs: float = 0.0

    def __repr__(self) -> str:
        # at_inputs only where given: most declarations leave it out.
        more = f", at_inputs={self.at_inputs!r}" if self.at_inputs else ""
        return f"Ulps(at_value={self.at_value!r}, at_scale={self.at_scale!r}{more})"


# What a float32 matmul keeps of each input's significand, in bits (the
# implicit leading one included): all of float32's at jax.lax.Precision.HIGHEST;
# TensorFloat-32's on NVIDIA tensor cores (XLA's default for float32 on GPUs,
# and what a Mosaic GPU kernel's wgmma computes, whatever the precision);
# bfloat16's in one pass of a TPU's matrix unit. The tolerances are counted for
# float32 inputs; at_platform widens them for what a platform's matmuls keep.
MATMUL_INPUT_BITS = {"float32": 24, "tensorfloat32": 11, "bfloat16": 8}


def at_platform(ulps: Ulps, matmul_inputs: Mapping[str, str], platform: str) -> Ulps:
    """ulps, counted for float32 matmul inputs, widened by the rounding of
    the inputs that the op's float32 matmuls make on `platform` (a jax.Device
    platform: cpu, gpu, tpu). matmul_inputs: platform -> a MATMUL_INPUT_BITS
    key, as the op declares it (absent: float32, what HIGHEST computes)."""
    bits = MATMUL_INPUT_BITS[matmul_inputs.get(platform, "float32")]
    scale = 2.0 ** (MATMUL_INPUT_BITS["float32"] - bits)
    return Ulps(ulps.at_value * scale, ulps.at_scale * scale, ulps.at_inputs * scale)


def platform_of(x) -> str:
    """The platform of the devices an array lives on (cpu for NumPy's)."""
    devices = getattr(x, "devices", None)
    if devices is None:
        return "cpu"
    return next(iter(devices())).platform


# (platform, dtype): the significand bits (the implicit one included) that a
# platform's arithmetic keeps where that is fewer than IEEE's (float32 24,
# float64 53); a result computed there may be off by 2**(IEEE's - these) times
# the counts an op declares for IEEE arithmetic. Measured on one TPU v5e ("TPU
# v5 lite", JAX 0.10.2, 2026-12-06) over the suites of the templates that
# compute there, the worst error as a multiple of the IEEE tolerance (a run's
# summary prints it):
# - float64, emulated with float32 pairs: 62.7x (custom-vjp's distances,
#   2048 x 3 points), 30x (internals' tridiagonal jvp): 45 bits, 256x.
# - float32, whose tanh, exp and reductions are not correctly rounded (tanh up
#   to about 1,350 ulps, exp 58): 106x (memory-and-sharding's reference loss,
#   426 ulps against 4), 13x (pallas's GELU reference): 16 bits, 256x.
PLATFORM_BITS = {("tpu", "float64"): 45, ("tpu", "float32"): 16}
# The kinds of operation whose results lose those bits, where not every kind
# does: a TPU's float32 adds, multiplies, selects and comparisons are IEEE's,
# so a program of those alone is held to IEEE's counts there (a declared
# Ulps(4) accepts 4 ulps, not 1,024). A TPU's float64 is emulated: every kind.
PLATFORM_KINDS = {("tpu", "float32"): frozenset({"transcendental", "reduction"})}
# jaxpr primitives -> their kind (operation_kinds in conformance/oracles.py reads a
# program's): not correctly rounded elementwise functions, and sums whose
# order and accumulation a platform chooses (matmuls included).
TRANSCENDENTAL = frozenset(
    {"exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan"}
    | {"asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "pow"}
    | {"erf", "erfc", "erf_inv", "lgamma", "digamma", "igamma", "sqrt", "rsqrt", "cbrt", "div"}
)
REDUCTION = frozenset(
    {"reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "psum"}
    | {"dot_general", "conv_general_dilated"}
)


def platform_scale(dtype, platform: str, kinds=None) -> float:
    """How many times the IEEE counts a result of dtype computed on platform
    may be off: 2**(the significand bits its arithmetic loses), else 1.
    kinds: the kinds of operation that computed it (None: unknown, any)."""
    accumulator = jnp.promote_types(jnp.dtype(dtype), jnp.float32)
    bits = PLATFORM_BITS.get((platform, accumulator.name))
    lossy = PLATFORM_KINDS.get((platform, accumulator.name))
    if bits is None or (kinds is not None and lossy is not None and not kinds & lossy):
        return 1.0
    return 2.0 ** (jnp.finfo(accumulator).nmant + 1 - bits)


WORST = {"error": 0.0, "fraction": 0.0, "ulps": 0.0, "dtype": "", "test": ""}
# platform/dtype of PLATFORM_BITS -> the worst error there as a multiple of
# the IEEE tolerance, and the test: what PLATFORM_BITS must cover.
PLATFORM_WORST: dict[str, tuple[float, str]] = {}


def spacing(dtype, value):
    """The distance from |value| to the next larger number of dtype (its ulp there)."""
    info = jnp.finfo(dtype)
    magnitude = np.maximum(np.abs(np.asarray(value, np.float64)), float(info.smallest_normal))
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2**exponent, 0.5 <= m < 1
    return np.ldexp(float(info.eps), exponent - 1)


def assert_close(
    got,
    want,
    ulps: Ulps,
    dtype=None,
    *,
    where="",
    inputs_at=None,
    platform=None,
    scale=0.0,
    also=None,
    kinds=None,
    details=None,
):
    """Each element of got within `ulps` of the oracle's want, and each
    non-finite one exactly the oracle's: NaN, +inf or -inf.

    scale: the size of the inputs that produced want (their largest |value|).
    Where the oracle is exactly zero everywhere, its own largest value says
    nothing of the terms that cancelled to make it (rounding noise of 2e-8
    against a zero would be 1e37 ulps): both counts are then taken at scale.
    also: an error each element may have besides (an ill-conditioned cell's
    multiple of the reference's own error, conformance/oracles.py). kinds: the kinds
    of operation that computed got (PLATFORM_KINDS; None: unknown, any).

    dtype: the op's result dtype; got's own unless given (pass it where got
    has been through another type, such as JSON's floats). platform: where
    got was computed; a JAX array's own, else the tests' default platform
    (devices.py) unless given.

    A failure says, in its first line, `where` (what was compared: the cell,
    the check, which output), how far the worst element is off and how far
    it may be, both in ulps of the result's dtype (and of the accumulator's
    where that is wider: a bfloat16 result's counts are float32's), its
    index and, from inputs_at(index) where given, the inputs that produced
    it; then, on lines of their own, what the tolerance is made of and
    details(index) where given (the inputs' shapes and values).
    """
    if platform is None:
        platform = platform_of(got) if hasattr(got, "devices") else default_platform()
    dtype = jnp.dtype(dtype or np.asarray(got).dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        # Each component in ulps of its own dtype (complex64's: float32).
        part = jnp.finfo(dtype).dtype
        for name, of in (("real part", np.real), ("imaginary part", np.imag)):
            assert_close(
                of(np.asarray(got)),
                of(np.asarray(want)),
                ulps,
                part,
                where=f"{where}, {name}" if where else name,
                inputs_at=inputs_at,
                platform=platform,
                scale=scale,
                also=also,
                kinds=kinds,
                details=details,
            )
        return
    if not jnp.issubdtype(dtype, jnp.floating):  # indices, counts: exact
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    accumulator = jnp.promote_types(dtype, jnp.float32)
    # Half an ulp for each result rounded to half precision: got, and want if
    # it was rounded to that dtype too.
    roundings = 0 if accumulator == dtype else 1 + (np.asarray(want).dtype == dtype)
    declared, widen = ulps, platform_scale(dtype, platform, kinds)
    ulps = Ulps(ulps.at_value * widen, ulps.at_scale * widen, ulps.at_inputs * widen)
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    prefix = f"{where}: " if where else ""
    assert got.shape == want.shape, f"{prefix}shape {got.shape} != expected {want.shape}"
    _assert_same_nonfinite(got, want, prefix, inputs_at, details)
    finite = np.isfinite(want)
    if not finite.any():
        return
    # The finite elements, compared in place (the others now match exactly).
    got, want = np.where(finite, got, 0.0), np.where(finite, want, 0.0)
    error = np.abs(got - want)
    largest = float(np.max(np.abs(want)))
    # An all-zero oracle: the counts at the inputs' scale (see the docstring).
    at = np.full(want.shape, scale) if largest == 0.0 and scale > 0 else want
    largest = max(largest, scale) if largest == 0.0 else largest

    # Each rounding the counts allow may instead be a flush: XLA's CPU flushes
    # subnormal results to zero (and reads subnormal operands as zeros), an
    # error of up to the smallest normal number, whatever the result's size.
    def bound(counts: Ulps):
        flushes = (counts.at_value + counts.at_scale + counts.at_inputs) * float(
            jnp.finfo(accumulator).smallest_normal
        )
        tolerance = (
            0.5 * roundings * spacing(dtype, want)
            + counts.at_value * spacing(accumulator, at)
            + counts.at_scale * spacing(accumulator, largest)
            + counts.at_inputs * spacing(accumulator, scale)
            + flushes
        )
        if also is not None:
            tolerance = np.maximum(tolerance, np.where(finite, also, 0.0))
        return np.maximum(tolerance, np.finfo(np.float64).tiny)

    fraction = error / bound(ulps)
    worst = np.unravel_index(int(np.argmax(fraction)), fraction.shape)
    off = float(error[worst] / spacing(dtype, at[worst]))
    test = os.environ.get("PYTEST_CURRENT_TEST", "? ").rsplit(" ", 1)[0]
    if fraction[worst] > WORST["fraction"] or not WORST["test"]:
        WORST.update(
            error=float(error[worst]),
            fraction=float(fraction[worst]),
            ulps=off,
            dtype=dtype.name,
            test=test,
        )
    if widen != 1.0:  # how far past IEEE's tolerance: what PLATFORM_BITS covers
        key = f"{platform}/{accumulator.name}"
        times = float(np.max(error / bound(declared)))
        if times > PLATFORM_WORST.get(key, (-1.0, ""))[0]:
            PLATFORM_WORST[key] = (times, test)
    if fraction[worst] <= 1.0:
        return
    allowed = float(bound(ulps)[worst])
    also_here = float(np.where(finite, also, 0.0)[worst]) if also is not None else 0.0
    zero_oracle = not np.any(want) and scale > 0
    lines = [
        f"{prefix}off by {_ulps(off)} of {dtype.name}"
        + _in_accumulator(float(error[worst]), accumulator, dtype, at[worst])
        + f" at {_at(worst, inputs_at)}; allowed {_ulps(allowed / spacing(dtype, at[worst]))}"
        + f" of {dtype.name}: got {float(got[worst])!r}, want {float(want[worst])!r}",
        "  tolerance: "
        + _tolerance(declared, widen, platform, dtype, accumulator, roundings, largest, scale)
        + (
            f", or the ill-conditioned cell's allowance here, {also_here:.3g}, the larger"
            if also_here >= allowed
            else ""
        ),
    ]
    if zero_oracle:
        lines.append(
            f"  the oracle is zero everywhere: ulps counted at the inputs' scale ({scale:.3g})"
        )
    lines += _details(details, worst)
    raise AssertionError("\n".join(lines))


def _ulps(count: float) -> str:
    """A count of ulps, as the messages say it: 0.828 ulp, 1 ulp, 106 ulps."""
    return f"{count:.3g} ulp" + ("s" if count > 1 else "")


def _in_accumulator(amount: float, accumulator, dtype, at: float) -> str:
    """amount in ulps of the accumulator too, where the result's dtype is
    narrower: a bfloat16 result's counts are float32's (see the docstring)."""
    if accumulator == dtype:
        return ""
    return f" (= {_ulps(amount / spacing(accumulator, at))} of {accumulator.name}, the accumulator)"


def _tolerance(declared, widen, platform, dtype, accumulator, roundings, largest, inputs) -> str:
    """What the tolerance is made of, in words: the declared counts, in ulps
    of the accumulator, and the half ulps of half precision's roundings."""
    times = f" x{widen:g} on {platform} (PLATFORM_BITS)" if widen != 1.0 else ""
    terms = []
    if declared.at_value:
        terms.append(f"{_ulps(declared.at_value)} of {accumulator.name} at the value{times}")
    if declared.at_scale:
        terms.append(
            f"{_ulps(declared.at_scale)} of {accumulator.name} at the largest |value| "
            f"({largest:.3g}){times}"
        )
    if declared.at_inputs:
        terms.append(
            f"{_ulps(declared.at_inputs)} of {accumulator.name} at the inputs' largest |value| "
            f"({inputs:.3g}){times}"
        )
    if roundings:
        what = "the result" if roundings == 1 else "the result and the oracle's each"
        terms.append(f"1/2 ulp of {dtype.name} for rounding {what} to {dtype.name}")
    return f"{declared} = " + (" + ".join(terms) or "exact")


def _details(details, index) -> list[str]:
    """The caller's lines on the inputs at an element (indented)."""
    if details is None:
        return []
    try:
        lines = details(tuple(int(i) for i in index))
    except Exception as error:  # a message's details never hide the failure itself
        lines = [f"(the inputs could not be shown: {type(error).__name__}: {error})"]
    return [f"  {line}" for line in lines if line]


def _assert_same_nonfinite(got, want, prefix, inputs_at, details=None):
    """NaN where the oracle has NaN, and each infinity with the oracle's sign:
    no tolerance makes a NaN an inf, or -inf +inf (1/|x| is not 1/x at -0)."""
    both_nan = np.isnan(got) & np.isnan(want)
    differs = (~np.isfinite(got) | ~np.isfinite(want)) & ~both_nan & (got != want)
    if differs.any():
        first = tuple(int(i) for i in np.argwhere(differs)[0])
        line = (
            f"{prefix}got {float(got[first])!r}, want {float(want[first])!r} at "
            f"{_at(first, inputs_at)} "
            f"({int(differs.sum())} such element(s)): a non-finite value must be the "
            "oracle's exactly (NaN, +inf or -inf)"
        )
        raise AssertionError("\n".join([line, *_details(details, first)]))


def _at(index, inputs_at):
    """An element's index, and the inputs at it where the caller can say."""
    index = tuple(int(i) for i in index)
    said = inputs_at(index) if inputs_at is not None else ""
    return f"index {index}" + (f" ({said})" if said else "")


SMALL = 16  # an array of at most this many elements is printed whole in a message


def summary(name: str, value, fixed=None) -> str:
    """One input, as a failure message shows it: its dtype and shape, and its
    values where it has at most SMALL elements; else, where `fixed` (a tuple
    with an index or None for each of its axes) picks a slice of at most
    SMALL, that slice (the row holding the worst element, say); else its
    smallest and largest values."""
    array = np.asarray(value)
    head = f"{name}: {array.dtype.name}{list(array.shape)}"
    if array.size <= SMALL:
        return f"{head} = {_values(array)}"
    if fixed is not None and len(fixed) == array.ndim:
        part = array[tuple(slice(None) if i is None else i for i in fixed)]
        where = ", ".join(":" if i is None else str(i) for i in fixed)
        if part.size == 1:  # the element: and the whole's range, for an op of rows
            return f"{head}, {name}[{where}] = {_values(part)}, " + _range(array)
        if part.size <= SMALL:
            return f"{head}, {name}[{where}] = {_values(part)}"
    return f"{head}, {_range(array)}"


def _range(array) -> str:
    """An array's smallest and largest values, and how many are not finite."""
    if array.dtype.kind not in "biuf" and not jnp.issubdtype(array.dtype, jnp.floating):
        return "values not shown"
    values = np.asarray(array, np.float64)
    finite = values[np.isfinite(values)]
    said = f"min {finite.min():.6g}, max {finite.max():.6g}" if finite.size else "none finite"
    nonfinite = values.size - finite.size
    return said + (f", {nonfinite} non-finite" if nonfinite else "")


def _values(array) -> str:
    """An array's values on one line, each exactly (its dtype's shortest
    repr: a bfloat16's in float32, which holds it exactly)."""
    if jnp.issubdtype(array.dtype, jnp.floating) and array.dtype.itemsize < 4:
        array = array.astype(np.float32)
    if array.ndim == 0:
        return str(array[()])
    return "[" + ", ".join(_values(part) for part in array) + "]"
