"""The standalone script that reproduces a failing cell (shrink.py makes the
cell small first).

`write_repro` writes a script, plain JAX and NumPy without jax_ladder,
that imports the op and its reference (and the declared oracles) from the
declaration's modules, holds the failing inputs (and cotangents) as array
literals, runs what the cell ran, compares with the float64 oracle on the
CPU within the same tolerance as a plain per-element bound, prints the worst
error and exits 1 while the bug is there (0 once it is fixed). It does so
for the values cells (eager, jit, jit-donate), size-*, hard-* (values, its
vmap of two draws, its gradient), the vmap cells of one vmap (vmap-new-axis,
vmap-only-*, vmap-mixed, vmap-axis-*) and the gradient cells (grad-*, vjp,
jit-grad); for any other cell, or an op or reference it cannot import, or a
cell declared ill-conditioned, the script reruns the cell through the
engine (jax_ladder) at the shrunk sizes, and its docstring says so.

The inputs are those the engine drew as the cell ran (shrink.recording()).
"""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

# The cells a standalone script reproduces, by family.
_VALUES = ("eager", "jit", "jit-donate")
_GRADIENTS = ("vjp", "jit-grad")
_ONE_VMAP = ("vmap-new-axis", "vmap-mixed")


def importable(obj: Any) -> tuple[str, str] | None:
    """(module, qualified name) from which `obj` imports as itself, else None."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not name or "<" in name:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return (module, name) if found is obj else None


def _module_root(module: str) -> str:
    """The folder to put on PYTHONPATH for `import module`."""
    file = getattr(sys.modules.get(module), "__file__", None)
    if not file:
        return ""
    path = Path(file).resolve()
    depth = module.count(".") + (2 if path.name == "__init__.py" else 1)
    return str(path.parents[depth - 1])


def _literal(array: Any) -> str:
    """An array as an np.array(...) literal of its dtype, values exact."""
    a = np.asarray(array)
    dtype = a.dtype.name
    if a.dtype.kind == "f" or "float" in dtype:
        values = np.asarray(a, np.float64).tolist()
    elif a.dtype.kind == "c":
        values = np.asarray(a, np.complex128).tolist()
    else:
        values = a.tolist()
    return f"np.array({values!r}, dtype=jnp.dtype({dtype!r}))"


def _arrays(arrays: Any) -> str:
    return "[\n" + "".join(f"    {_literal(a)},\n" for a in arrays) + "]"


def _find(record: list[Any], kind: str, nth: int = -1) -> Any:
    """The nth draw of a kind (the last by default: any draw the engine makes
    before the cell's own, checking the declaration, comes first)."""
    found = [r for r in record if r[0] == kind]
    return found[nth] if -len(found) <= nth < len(found) else None


def write_repro(
    spec: Any,
    cell: str,
    seed: int,
    record: list[Any],
    message: str,
    directory: str | Path,
    *,
    values: str = "as declared",
) -> Path:
    """Write <directory>/repro_<op>_<cell>.py (see the module's docstring)
    and return its path."""
    from . import conformance
    from .compare import PLATFORM_KINDS, at_platform, platform_scale
    from .devices import default_platform

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^\w]+", "_", f"{spec.name}_{cell}").strip("_")
    path = directory / f"repro_{safe}.py"
    base = cell.partition("@")[0]
    op, reference = importable(spec.op), importable(spec.reference)
    body = None
    if op and reference and conformance.ill_conditioned(spec, cell) is None:
        body = _standalone_body(spec, base, record)
    if body is None:
        path.write_text(_engine_script(spec, cell, seed, message, op, reference, values))
        return path
    platform = default_platform()
    dtype = spec.cell_dtypes[0] if "@" not in cell else cell.partition("@")[2]
    partly_ieee = {p for p, _ in PLATFORM_KINDS}  # where the kinds of operation matter
    kinds = conformance.operation_kinds(spec) if platform in partly_ieee else None
    widen = platform_scale(dtype, platform, kinds)
    tolerance = at_platform(spec.tolerance, spec.matmul_inputs, platform)
    gradient = at_platform(spec.gradient_tolerance, spec.matmul_inputs, platform)
    oracle, gradient_oracle = importable(spec.oracle), importable(spec.gradient_oracle)
    roots = sorted({_module_root(m) for m, _ in filter(None, (op, reference, oracle))} - {""})
    assert op is not None  # else the engine's script, above
    assert reference is not None
    imports = [_import(op, "op"), _import(reference, "reference")]
    imports.append(_import(oracle, "declared_oracle") if oracle else "declared_oracle = None")
    imports.append(
        _import(gradient_oracle, "declared_gradient_oracle")
        if gradient_oracle
        else "declared_gradient_oracle = None"
    )
    diff_args = tuple(i for i, a in enumerate(spec.args) if a.differentiable)
    header = _docstring(
        spec,
        cell,
        seed,
        message,
        values,
        roots,
        f"the float64 oracle ({'the declared oracle' if oracle else 'the reference in float64'}"
        f", on the CPU)",
        f"{'IEEE' if widen == 1 else f'{widen:g}x IEEE'} counts on {platform}",
        path,
    )
    text = (
        header
        + _PRELUDE.format(
            imports="\n".join(imports),
            tolerance=(tolerance.at_value * widen, tolerance.at_scale * widen),
            gradient=(gradient.at_value * widen, gradient.at_scale * widen),
            diff_args=diff_args,
            diff_outputs=repr(spec.differentiable_outputs),
            names=[a.name for a in spec.args],
        )
        + body
        + _MAIN
    )
    path.write_text(text)
    return path


def _import(found: tuple[str, str], alias: str) -> str:
    module, name = found
    if "." not in name:
        return f"from {module} import {name}" + (f" as {alias}" if alias != name else "")
    head, rest = name.split(".", 1)
    return f"from {module} import {head}\n\n{alias} = {head}.{rest}"


def _docstring(
    spec: Any,
    cell: str,
    seed: int,
    message: str,
    values: str,
    roots: list[str],
    oracle: str,
    counts: str,
    script: Path,
) -> str:
    sizes = ", ".join(f"{a} = {s}" for a, s in spec.sizes.items())
    failure = textwrap.indent(message.strip(), "    ")
    path = f"PYTHONPATH={':'.join(roots)} " if roots else ""
    return f'''"""Reproduces the opcheck failure of {spec.name}'s cell {cell} (seed {seed}), at
sizes {sizes}, values {values}:

{failure}

Plain JAX and NumPy, no jax_ladder: it imports the op and its reference from
their modules, runs what the cell runs on the inputs it drew (below, exact),
compares each result with {oracle}
within the declared tolerance ({counts}), prints the worst error of
each, and exits 1 while one is beyond it (0 once the op is fixed).

    {path}python {script}
"""

'''


_PRELUDE = '''import sys

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
    at_value, at_scale = tolerance
    bound = (
        0.5 * roundings * spacing(dtype, want)
        + at_value * spacing(accumulator, at)
        + at_scale * spacing(accumulator, largest)
        + (at_value + at_scale) * float(jnp.finfo(accumulator).smallest_normal)
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

_MAIN = """

if __name__ == "__main__":
    ok = main()
    if ok:
        print("not reproduced: every result within the tolerance")
    else:
        print("reproduced: the op is beyond its tolerance")
    sys.exit(0 if ok else 1)
"""


def _standalone_body(spec: Any, cell: str, record: list[Any]) -> str | None:
    """main() for the cell's family, with its inputs; None for a family a
    standalone script does not reproduce (the engine script does)."""
    args, cts = _find(record, "args"), _find(record, "cotangents")
    names = [spec.args[i].name for i, a in enumerate(spec.args) if a.differentiable]
    grad_names = repr(names)
    lines: list[str] = []
    if cell in _VALUES or cell.startswith("size-"):
        if args is None:
            return None
        lines += [f"ARGS = {_arrays(args[1])}", ""]
        call = "op" if cell == "eager" else "jax.jit(op)"
        main = [
            "def main():",
            "    ok = True",
            f"    got = outputs({call}(*[jnp.asarray(a) for a in ARGS]))",
            f"    ok &= compare_all({cell!r}, got, oracle(ARGS), TOLERANCE, scale_of(ARGS))",
        ]
        if cell.startswith("size-") and cts is not None:
            lines += [f"COTANGENTS = {_arrays(cts[1])}", ""]
            main += _gradient_lines("jit(grad)", "jax.jit", grad_names)
        return "\n".join(lines + main + ["    return ok", ""])
    if cell.startswith("hard-"):
        first, second = _find(record, "hard", -2), _find(record, "hard", -1)
        if first is None or second is None:
            return None
        lines += [f"ARGS = {_arrays(first[1])}", "", f"MORE = {_arrays(second[1])}", ""]
        if cts is not None:
            lines += [f"COTANGENTS = {_arrays(cts[1])}", ""]
        either = cell == "hard-tiny"
        lines += [_FLUSHED, ""] if either else []
        main = [
            "def main():",
            "    ok = True",
            "    args = [jnp.asarray(a) for a in ARGS]",
            f"    views = [ARGS, flushed(ARGS)] if {either} else [ARGS]",
            "    for where, fn in (('eager', op), ('jit', jax.jit(op))):",
            "        got = outputs(fn(*args))",
            "        ok &= any([compare_all(where, got, oracle(v), TOLERANCE, scale_of(ARGS))"
            " for v in views])",
            "    batched = [jnp.stack([a, b]) for a, b in zip(ARGS, MORE)]",
            "    got = outputs(jax.jit(jax.vmap(op))(*batched))",
            f"    more = [MORE, flushed(MORE)] if {either} else [MORE]",
            "    wants = [[np.stack(p) for p in zip(oracle(v), oracle(m))]"
            " for v, m in zip(views, more)]",
            "    ok &= any([compare_all('jit(vmap), two draws', got, w, TOLERANCE,"
            " scale_of(batched)) for w in wants])",
        ]
        if cts is not None:
            main += [
                "    cts = [jnp.asarray(c) for c in COTANGENTS]",
                "    got = jax.jit(jax.grad(loss(op, cts), argnums=DIFF_ARGS))(*args)",
                "    ok &= any([compare_all('jit(grad)', got, gradient_oracle(v, COTANGENTS),"
                f" GRADIENT_TOLERANCE, scale_of(ARGS), {grad_names}) for v in views])",
            ]
        return "\n".join(lines + main + ["    return ok", ""])
    if cell in _ONE_VMAP or cell.startswith(("vmap-only-", "vmap-axis-")):
        vmap = _find(record, "vmap")
        if vmap is None:
            return None
        in_axes, out_axes = vmap[2]["in_axes"], vmap[2]["out_axes"]
        lines += [
            f"BATCHED = {_arrays(vmap[1])}",
            "",
            f"IN_AXES = {list(in_axes)!r}",
            f"OUT_AXES = {out_axes!r}",
            "",
        ]
        main = [
            "def main():",
            "    batched = [jnp.asarray(b) for b in BATCHED]",
            "    mapped = jax.vmap(op, in_axes=IN_AXES, out_axes=OUT_AXES)",
            "    got = outputs(mapped(*batched))",
        ]
        if cell.startswith("vmap-axis-"):  # over the op's own axis: the whole call's oracle
            main.append("    want = oracle(BATCHED)")
        else:
            main += [
                "    size = next(b.shape[ax] for b, ax in zip(BATCHED, IN_AXES) if ax is not None)",
                "    slices = [[b if ax is None else np.take(b, i, axis=ax)"
                " for b, ax in zip(BATCHED, IN_AXES)] for i in range(size)]",
                "    parts = [oracle(s) for s in slices]",
                "    axes = OUT_AXES if isinstance(OUT_AXES, tuple)"
                " else (OUT_AXES,) * len(parts[0])",
                "    want = [np.stack(outs, axis=ax) for outs, ax in zip(zip(*parts), axes)]",
            ]
        main += [
            "    where = f'vmap, in_axes={IN_AXES}, out_axes={OUT_AXES}'",
            "    return compare_all(where, got, want, TOLERANCE, scale_of(BATCHED))",
            "",
        ]
        return "\n".join(lines + main)
    if cell.startswith("grad-") or cell in _GRADIENTS:
        if args is None or cts is None:
            return None
        lines += [f"ARGS = {_arrays(args[1])}", "", f"COTANGENTS = {_arrays(cts[1])}", ""]
        main = ["def main():", "    ok = True", "    args = [jnp.asarray(a) for a in ARGS]"]
        if cell.startswith("grad-"):
            name = cell.removeprefix("grad-")
            i = [a.name for a in spec.args].index(name)
            diff = [j for j, a in enumerate(spec.args) if a.differentiable]
            main += [
                "    cts = [jnp.asarray(c) for c in COTANGENTS]",
                f"    got = [jax.grad(loss(op, cts), argnums={i})(*args)]",
                f"    want = [gradient_oracle(ARGS, COTANGENTS)[{diff.index(i)}]]",
                f"    ok &= compare_all('grad', got, want, GRADIENT_TOLERANCE, scale_of(ARGS),"
                f" [{name!r}])",
            ]
        else:
            main += _gradient_lines(
                "jit(vjp)" if cell == "vjp" else "jit(grad)", "jax.jit", grad_names
            )
        return "\n".join(lines + main + ["    return ok", ""])
    return None


def _gradient_lines(where: str, wrap: str, names: str) -> list[str]:
    return [
        "    cts = [jnp.asarray(c) for c in COTANGENTS]",
        f"    got = {wrap}(jax.grad(loss(op, cts), argnums=DIFF_ARGS))"
        "(*[jnp.asarray(a) for a in ARGS])",
        f"    ok &= compare_all({where!r}, got, gradient_oracle(ARGS, COTANGENTS),"
        f" GRADIENT_TOLERANCE, scale_of(ARGS), {names})",
    ]


_FLUSHED = '''def flushed(args):
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


def _engine_script(
    spec: Any,
    cell: str,
    seed: int,
    message: str,
    op: tuple[str, str] | None,
    reference: tuple[str, str] | None,
    values: str,
) -> str:
    """A script that reruns the cell through jax_ladder's engine, at the
    shrunk sizes: for what a standalone script does not reproduce."""
    location = _spec_location(spec)
    why = []
    if op is None or reference is None:
        missing = [n for n, f in (("op", op), ("reference", reference)) if f is None]
        why.append(
            f"the {' and '.join(missing)} cannot be imported as themselves (defined inside a "
            "function, or under another name)"
        )
    else:
        why.append(f"a standalone script does not reproduce the {cell} cell's family")
    failure = textwrap.indent(message.strip(), "    ")
    sizes = dict(spec.sizes)
    if location is None:
        load = (
            "raise SystemExit(\n"
            f"    'the declaration {spec.name!r} is no module attribute: import it here as SPEC'\n"
            ")"
        )
    else:
        load = f"from {location[0]} import {location[1]} as SPEC"
    rounded = ""
    if values != "as declared":
        rounded = (
            "from jax_ladder.opcheck.shrink import VALUES, _rounded\n\n"
            "SPEC = dataclasses.replace(SPEC, args=tuple(\n"
            f"    _rounded(a, VALUES[{values!r}]) if a.sample is None and a.dtype is None else a\n"
            "    for a in SPEC.args\n"
            "))\n"
        )
    return f'''"""Reruns the opcheck cell {cell} of {spec.name} (seed {seed}) through the
engine (jax_ladder), at sizes {sizes}, values {values}: not a standalone
script, because {"; ".join(why)}. It failed with:

{failure}

It exits 1 while the cell fails, 0 once it passes.
"""

import dataclasses
import sys

import jax

jax.config.update("jax_num_cpu_devices", 8)

from jax_ladder.opcheck import check

{load}

SPEC = dataclasses.replace(SPEC, sizes={sizes!r})
{rounded}
report = check(SPEC, cells=[{cell!r}], seed={seed})
print(report)
for result in report.failed:
    print(result.message)
sys.exit(1 if report.failed else 0)
'''


def _spec_location(spec: Any) -> tuple[str, str] | None:
    """(module, attribute) of a loaded module holding this declaration, or
    one equal to it up to its sizes (the shrunk one is a copy)."""
    for name, module in list(sys.modules.items()):
        if module is None or name.startswith(("jax", "numpy", "_")):
            continue
        for attribute, value in list(vars(module).items()):
            if (
                type(value).__name__ == "OpSpec"
                and getattr(value, "name", None) == spec.name
                and value.op is spec.op
                and value.reference is spec.reference
            ):
                return name, attribute
    return None
