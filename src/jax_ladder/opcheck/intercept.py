"""The inputs a suite already gives an op, recorded and replayed through the
matrix, and the expected failures a repository adopting it lists (the
plugin's --opcheck-record and opcheck_failures.json; docs/opcheck.md).

A declaration file names where the user's code looks its op up:

    INTERCEPT = "mypkg.ops:softplus"            # the file's one OpSpec
    INTERCEPT = {"softplus": "mypkg.ops:softplus", "gelu": "mypkg.ops:gelu"}

With --opcheck-record, that attribute is replaced for the run by a wrapper
that calls the op and keeps the arguments of its calls whose arguments are
all concrete arrays (a call under a trace has tracers: it is not kept):
each test's first KEEP_PER_TEST calls, leaving out a call whose arguments
equal (shapes, dtypes and values) those of one kept, and at most KEEP in
all. At the end of the run they are written beside the declaration,
`<stem>.recorded.npz`, each with the test that made the call; a run that
finds that file replays each recording through a few cells, the spec's axis
sizes read from the recorded shapes (an argument declared with "..." takes
any leading axes: sizes["..."] is the call's leading shape) and each
argument's values the recorded ones.

The plugin reads INTERCEPT from the file's text (a literal), not by
importing it: the wrapper must be in place before the user's tests, and the
declaration itself, import the op.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .conformance import LEADING, Arg, OpSpec

KEEP_PER_TEST = 4  # calls kept of each test, each with other arguments than those kept
KEEP = 32  # calls kept per op, in all
NAME = "INTERCEPT"
RECORDED = ".recorded.npz"  # <declaration stem> + this
FAILURES = "opcheck_failures.json"  # beside the declarations: {item name: reason}


def recordings_path(declaration: Path) -> Path:
    return declaration.with_name(declaration.stem + RECORDED)


def failures_path(declaration: Path) -> Path:
    return declaration.with_name(FAILURES)


def intercepts(declaration: Path) -> dict[str | None, str]:
    """The declaration's INTERCEPT: op name (None: the file's one OpSpec) ->
    "module:attribute". {} where the file has none."""
    tree = ast.parse(declaration.read_text(), str(declaration))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == NAME for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError as error:
                raise ValueError(f"{declaration}: {NAME} must be a literal ({error})") from error
            if isinstance(value, str):
                return {None: value}
            if isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                return dict(value)
            raise ValueError(
                f'{declaration}: {NAME} is "module:attribute", or {{op name: "module:attribute"}}'
            )
    return {}


class Recorder:
    """One intercepted op: its wrapper in place of the attribute, the calls
    it saw and the arguments it kept."""

    paused = 0  # >0 while the plugin's own cells run: their calls are not the suite's
    current = ""  # the test running, where a kept call came from

    def __init__(self, declaration: Path, op: str | None, target: str) -> None:
        self.declaration, self.op, self.target = declaration, op, target
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f'{declaration}: {NAME} {target!r} is not "module:attribute"')
        owner: Any = importlib.import_module(module)
        *path, self.attribute = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        self.owner = owner
        self.real = getattr(owner, self.attribute)
        self.calls = 0
        self.skipped: Counter[str] = Counter()
        self.kept: list[Recording] = []
        self.seen: set[tuple[Any, ...]] = set()  # the kept calls' arguments: _identity
        self.per_test: Counter[str] = Counter()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        setattr(self.owner, self.attribute, Intercepted(self))
        try:
            yield
        finally:
            setattr(self.owner, self.attribute, self.real)

    def see(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Keep a call's arguments, before the op runs (it may donate them)."""
        if Recorder.paused:
            return
        self.calls += 1
        why = self._not_kept(args, kwargs)
        if why:
            self.skipped[why] += 1
            return
        try:
            values = tuple(_host(a) for a in args)
        except Exception as error:  # not addressable from this process, say
            self.skipped[f"not readable ({type(error).__name__})"] += 1
            return
        identity = _identity(args, values)
        if identity in self.seen:
            self.skipped["the same arguments as a call kept"] += 1
            return
        if self.per_test[Recorder.current] >= KEEP_PER_TEST:
            self.skipped[f"beyond the first {KEEP_PER_TEST} of a test"] += 1
            return
        self.seen.add(identity)
        self.per_test[Recorder.current] += 1
        dtypes = tuple(str(a.dtype) for a in args)
        self.kept.append(Recording(self.op, self.target, Recorder.current, values, dtypes))

    def _not_kept(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        if kwargs:
            return "keyword arguments"
        if any(isinstance(a, jax.core.Tracer) for a in args):
            return "traced (under jit, grad, vmap...)"
        if not all(isinstance(a, (np.ndarray, np.generic, jax.Array)) for a in args):
            return "an argument not an array"
        if len(self.kept) >= KEEP:
            return f"beyond the first {KEEP} in all"
        return ""

    def summary(self) -> str:
        line = f"{self.target}: {self.calls} call(s), {len(self.kept)} kept"
        if self.skipped:
            line += "; not kept: " + ", ".join(f"{n} {why}" for why, n in self.skipped.items())
        return line


def _identity(args: tuple[Any, ...], values: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    """What makes two calls the same: each argument's shape, dtype and bytes."""
    return tuple(
        (np.shape(a), str(a.dtype), hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
        for a, v in zip(args, values, strict=True)
    )


def _host(a: Any) -> np.ndarray:
    """A copy on the host; a dtype NumPy does not have natively (bfloat16,
    the float8s) as float64, which holds its values exactly."""
    values = np.array(a)
    return values.astype(np.float64) if values.dtype.kind == "V" else values


class Intercepted:
    """The op, as the suite sees it during a recording run: it calls the op
    and lets the recorder see the arguments first. Any other attribute is
    the op's (a jitted function's lower, say)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self.__wrapped__ = recorder.real
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            with contextlib.suppress(AttributeError):
                setattr(self, name, getattr(recorder.real, name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._recorder.see(args, kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__wrapped__, name)


@dataclass(frozen=True)
class Recording:
    """One kept call: its arguments' values (as _host keeps them) and dtypes."""

    op: str | None  # INTERCEPT's key: None for the file's one OpSpec
    target: str
    called_from: str  # the test that made the call
    values: tuple[np.ndarray, ...]
    dtypes: tuple[str, ...]


def write(path: Path, recorders: list[Recorder]) -> int:
    """Every kept call of these recorders into path (an .npz, its index a
    JSON string inside): how many."""
    kept = [r for recorder in recorders for r in recorder.kept]
    arrays: dict[str, np.ndarray] = {}
    index = []
    for i, recording in enumerate(kept):
        for j, values in enumerate(recording.values):
            arrays[f"{i}/{j}"] = values
        index.append(
            {
                "op": recording.op,
                "target": recording.target,
                "called_from": recording.called_from,
                "dtypes": list(recording.dtypes),
            }
        )
    arrays["index"] = np.array(json.dumps(index, indent=1))
    np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stubs: the names are the arrays
    return len(kept)


def read(path: Path) -> list[Recording]:
    with np.load(path, allow_pickle=False) as stored:
        index = json.loads(str(stored["index"][()]))
        return [
            Recording(
                entry["op"],
                entry["target"],
                entry["called_from"],
                tuple(stored[f"{i}/{j}"] for j in range(len(entry["dtypes"]))),
                tuple(entry["dtypes"]),
            )
            for i, entry in enumerate(index)
        ]


def replayed(spec: OpSpec, recording: Recording) -> OpSpec:
    """The spec with the recording's inputs: each named axis's size read from
    the recorded shapes (and sizes["..."], where an argument's axes begin
    with "...", the recorded leading axes: the cells then draw and compare
    at the call's own rank), the floating arguments' dtype the recorded one, and
    each argument's `sample` the recorded values (where a cell asks for
    another shape, the argument's own draw). ValueError where the recording
    does not fit the declaration."""
    if len(recording.values) != len(spec.args):
        raise ValueError(
            f"{len(recording.values)} arguments recorded, {len(spec.args)} declared "
            f"({[a.name for a in spec.args]})"
        )
    sizes: dict[str, Any] = {}
    seen: dict[str, str] = {}
    floating: set[str] = set()
    for arg, values, dtype in zip(spec.args, recording.values, recording.dtypes, strict=True):
        for axis, size in _axis_sizes(arg, values.shape):
            if sizes.setdefault(axis, size) != size:
                what = "the leading axes ('...') are" if axis == LEADING else f"axis {axis!r} is"
                raise ValueError(
                    f"{what} {sizes[axis]} in {seen[axis]} and {size} in {arg.name} "
                    "as recorded: the declaration gives both the same size"
                )
            seen.setdefault(axis, arg.name)
        if arg.dtype is None and np.issubdtype(np.dtype(_numpy_dtype(dtype)), np.inexact):
            floating.add(dtype)
    if len(floating) > 1:
        raise ValueError(
            f"floating arguments recorded in {sorted(floating)}: the matrix gives every "
            "floating argument one dtype (OpSpec.dtype)"
        )
    args = tuple(
        replace(arg, sample=_sample(arg, values))
        for arg, values in zip(spec.args, recording.values, strict=True)
    )
    dtype = floating.pop() if floating else spec.dtype
    return replace(spec, args=args, sizes={**spec.sizes, **sizes}, dtype=dtype)


def _axis_sizes(arg: Arg, shape: tuple[int, ...]) -> list[tuple[str, Any]]:
    """Each of the argument's declared axes with its size in a recorded shape:
    "..." (LEADING) with the shape's leading axes, a tuple (any number of
    them, none too), each named axis with its own. ValueError, saying why the
    call cannot be replayed, where the shape has too few axes, or a number
    the declaration does not take."""
    declared = f"{arg.name}[{', '.join(arg.axes)}]"
    if arg.axes[:1] == (LEADING,):
        named = arg.axes[1:]
        if len(shape) < len(named):
            raise ValueError(
                f"{arg.name} was recorded with shape {shape} ({len(shape)} axes), and the "
                f"declaration {declared} needs at least {len(named)}: this call cannot be "
                "replayed"
            )
        lead = len(shape) - len(named)
        return [(LEADING, tuple(shape[:lead])), *zip(named, shape[lead:], strict=True)]
    if len(shape) != len(arg.axes):
        hint = f"{arg.name}[..., {', '.join(arg.axes)}]" if arg.axes else f"{arg.name}[...]"
        raise ValueError(
            f"{arg.name} was recorded with shape {shape} ({len(shape)} axes), and the "
            f"declaration {declared} has {len(arg.axes)}: this call cannot be replayed "
            f"(an op that takes any leading axes declares them: {hint})"
        )
    return list(zip(arg.axes, shape, strict=True))


def _numpy_dtype(name: str) -> Any:
    """A dtype's name as jax.numpy knows it (bfloat16 too)."""
    return jax.numpy.dtype(name)


def _sample(
    arg: Arg, values: np.ndarray
) -> Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]:
    own = arg.sample

    def sample(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if tuple(shape) == values.shape:
            floating = np.issubdtype(values.dtype, np.inexact)
            return values.astype(np.float64) if floating else values
        return own(rng, shape) if own is not None else rng.standard_normal(shape)

    return sample


def default_replay_cells(spec: OpSpec) -> list[str]:
    """The cells a recording replays through unless the run chooses: those
    that run at any size (the mesh cells need sizes divisible by 4)."""
    grads = [f"grad-{a.name}" for a in spec.args if a.differentiable]
    return ["eager", "jit", "vmap-new-axis", *grads, "vjp", "jvp"]


def read_failures(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    listed = json.loads(path.read_text())
    if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
        raise ValueError(f'{path}: expected {{"<item name>": "reason"}}')
    return listed


def write_failures(path: Path, outcomes: Mapping[str, str | None]) -> dict[str, str]:
    """The file's list updated with this run's outcomes (item name -> its
    error's first line, None where it passed); items the run did not run
    keep their entries."""
    listed = read_failures(path)
    for name, error in outcomes.items():
        if error is None:
            listed.pop(name, None)
        else:
            listed[name] = error
    path.write_text(json.dumps(dict(sorted(listed.items())), indent=2) + "\n")
    return listed
