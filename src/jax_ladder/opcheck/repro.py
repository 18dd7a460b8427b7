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
import os
import re
import site
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from .failures import RAISED_PATTERN
from .repro_text import CHECKS, FLUSHED, MAIN, PRELUDE

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


def script_roots(spec: Any) -> list[Path]:
    """The folders a repro script's imports need on PYTHONPATH, the op's
    first: those of the op's, the reference's, the oracles' and the
    declaration's modules (an engine script imports it), but none Python
    finds by itself (an installed package, the standard library)."""
    return [root for _, root in _roots(spec)]


def _roots(spec: Any) -> list[tuple[str, Path]]:
    functions = (spec.op, spec.reference, spec.oracle, spec.gradient_oracle)
    modules = [found[0] for found in map(importable, functions) if found]
    location = _spec_location(spec)
    modules += [location[0]] if location else []
    own = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    own |= {*site.getsitepackages(), site.getusersitepackages()}
    python = {Path(p).resolve() for p in own if p}
    roots: dict[Path, str] = {}
    for module in modules:
        root = _module_root(module)
        if root and module != "__main__" and Path(root) not in python:
            roots.setdefault(Path(root), module)
    return [(module, root) for root, module in roots.items()]


def how_to_run(spec: Any, script: Path) -> str:
    """How to run the script, in its docstring: from the op's module's
    folder, with PYTHONPATH relative to it. No absolute path: the script is
    for whoever the failure is sent to, on another machine."""
    roots = _roots(spec)
    if not roots:
        return f"Run it where the op's modules are installed:\n\n    python {script.name}\n"
    module, home = roots[0]
    paths = os.pathsep.join(os.path.relpath(root, home) for _, root in roots)
    try:
        where = os.path.relpath(Path(script).resolve(), home)
    except ValueError:  # another drive
        where = Path(script).name
    top = module.split(".")[0]
    holds = f"{top}/" if "." in module or _is_package(top) else f"{top}.py"
    return (
        f"Run it from the folder that holds {holds} (where `import {module}` works):\n\n"
        f"    PYTHONPATH={paths} python {where}\n"
    )


def _is_package(module: str) -> bool:
    file = getattr(sys.modules.get(module), "__file__", None) or ""
    return Path(file).name == "__init__.py"


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
        how = how_to_run(spec, path).replace("Run it", "Run it, with jax_ladder installed,", 1)
        path.write_text(_engine_script(spec, cell, seed, message, op, reference, values, how))
        return path
    platform = default_platform()
    dtype = spec.cell_dtypes[0] if "@" not in cell else cell.partition("@")[2]
    partly_ieee = {p for p, _ in PLATFORM_KINDS}  # where the kinds of operation matter
    kinds = conformance.operation_kinds(spec) if platform in partly_ieee else None
    widen = platform_scale(dtype, platform, kinds)
    tolerance = at_platform(spec.tolerance, spec.matmul_inputs, platform)
    gradient = at_platform(spec.gradient_tolerance, spec.matmul_inputs, platform)
    oracle, gradient_oracle = importable(spec.oracle), importable(spec.gradient_oracle)
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
        how_to_run(spec, path),
        f"the float64 oracle ({'the declared oracle' if oracle else 'the reference in float64'}"
        f", on the CPU)",
        f"{'IEEE' if widen == 1 else f'{widen:g}x IEEE'} counts on {platform}",
    )
    text = (
        header
        + PRELUDE.format(
            imports="\n".join(imports),
            tolerance=tuple(
                t * widen for t in (tolerance.at_value, tolerance.at_scale, tolerance.at_inputs)
            ),
            gradient=tuple(
                t * widen for t in (gradient.at_value, gradient.at_scale, gradient.at_inputs)
            ),
            diff_args=diff_args,
            diff_outputs=repr(spec.differentiable_outputs),
            names=[a.name for a in spec.args],
        )
        + body
        + f"\nRAISED = {_raised(cell, message)!r}  # the error the cell raised, if any\n"
        + MAIN
    )
    path.write_text(text)
    return path


# An absolute path in a failure's message (an error of JAX's names the op's
# file): not a URL's (after ':' or '/').
_ABSOLUTE = re.compile(r"(?<![\w.:/\\])(?:/[\w.+~@-]+)+/([\w.+~@-]+)")


def no_paths(text: str) -> str:
    """text, each absolute path in it cut to its file's name."""
    return _ABSOLUTE.sub(r"\1", text)


def _raised(cell: str, message: str) -> str | None:
    """The type of the error the cell raised (None: a comparison failed)."""
    first = message.splitlines()[0] if message else ""
    found = RAISED_PATTERN.match(first.removeprefix(f"[{cell}] "))
    return found[1].rpartition(".")[2] if found else None


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
    how: str,
    oracle: str,
    counts: str,
) -> str:
    sizes = ", ".join(f"{a} = {s}" for a, s in spec.sizes.items())
    failure = textwrap.indent(no_paths(message.strip()), "    ")
    return f'''"""Reproduces the opcheck failure of {spec.name}'s cell {cell} (seed {seed}), at
sizes {sizes}, values {values}:

{failure}

Plain JAX and NumPy, no jax_ladder: it imports the op and its reference from
their modules, runs what the cell runs on the inputs it drew (below, exact),
compares each result with {oracle}
within the declared tolerance ({counts}), prints the worst error of
each, and exits 1 while one is beyond it (0 once the op is fixed).

{how}"""

'''


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
        if cell in ("eager", "jit"):  # what else those cells hold results to, in their order
            lines += [f"NONDETERMINISTIC = {sorted(spec.nondeterministic)!r}", CHECKS, ""]
            main = [
                "def main():",
                "    ok = True",
                "    args = [jnp.asarray(a) for a in ARGS]",
                *(["    ok &= as_reference(args)"] if cell == "eager" else []),
                f"    fn = {call}",
                f"    got, declared = as_declared({cell!r}, fn, args)",
                "    ok &= declared",
                f"    ok &= none_consumed({cell!r}, args)",
                f"    ok &= compare_all({cell!r}, outputs(got), oracle(ARGS), TOLERANCE,"
                " scale_of(ARGS))",
                f"    ok &= same_bits({cell!r}, got, fn(*[jnp.asarray(a) for a in ARGS]))",
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
        lines += [FLUSHED, ""] if either else []
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
    # grad-<arg> by the arguments' own names: grad-grad-explicit-* (second
    # order on a mesh) shares the prefix and is the engine script's.
    one_grad = {f"grad-{a.name}": i for i, a in enumerate(spec.args) if a.differentiable}
    if cell in one_grad or cell in _GRADIENTS:
        if args is None or cts is None:
            return None
        lines += [f"ARGS = {_arrays(args[1])}", "", f"COTANGENTS = {_arrays(cts[1])}", ""]
        main = ["def main():", "    ok = True", "    args = [jnp.asarray(a) for a in ARGS]"]
        if cell in one_grad:
            name, i = cell.removeprefix("grad-"), one_grad[cell]
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


def _engine_script(
    spec: Any,
    cell: str,
    seed: int,
    message: str,
    op: tuple[str, str] | None,
    reference: tuple[str, str] | None,
    values: str,
    how: str,
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
    failure = textwrap.indent(no_paths(message.strip()), "    ")
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

{how}"""

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
print("reproduced: the cell fails" if report.failed else "not reproduced: the cell passes")
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
