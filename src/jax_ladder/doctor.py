"""`jax-ladder doctor`: what is installed here, what each rung can do here, and
the known problems of the installed versions.

`gather()` collects facts (package versions without importing them; backends
and devices from a JAX subprocess with a timeout, so a broken plugin cannot
hang or crash the doctor; tool versions in parallel). `assess(facts)` turns
them into per-rung statuses, warnings and fatal problems; it is pure, so the
tests feed it made-up versions. Only a fatal problem (the kit itself cannot
work) makes the command exit non-zero.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from jax_ladder import __version__
from jax_ladder.rungs import LADDER, available, template_dir

SUPPORTED_JAX = ((0, 12), (0, 13))  # >=0.12,<0.13, as in pyproject.toml
MIN_PYTHON = (3, 12)
MIN_CMAKE = (3, 18)  # the kit's and the FFI template's CMakeLists.txt
PACKAGES = (
    "jax",
    "jaxlib",
    "cookiecutter",
    "numpy",
    "nanobind",
    "scikit-build-core",
    "flatbuffers",
    "pytest",
    "ruff",
)
TOOLS = ("c++", "g++", "clang++", "cmake", "nvcc")
CXX = ("c++", "g++", "clang++")
PLUGIN_PREFIXES = ("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "libtpu", "jax-tpu")
YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"

RUNS, LOWER_ONLY, INTERPRET_ONLY, CANNOT = "runs", "lower only", "interpret only", "cannot"

# Imported in a subprocess: prints one JSON line, never raises.
PROBE = r"""
import json, sys
out = {"ok": False}
try:
    import jax, jaxlib
    out["jax"], out["jaxlib"] = jax.__version__, jaxlib.__version__
    import jax.extend.backend as jb
    backends = {}
    for platform in sorted(jb.backends()):
        try:
            backends[platform] = [
                {"kind": d.device_kind, "id": d.id,
                 "compute_capability": getattr(d, "compute_capability", None)}
                for d in jax.devices(platform)
            ]
        except Exception as err:
            backends[platform] = str(err).splitlines()[0] if str(err) else type(err).__name__
    out["backends"], out["default_backend"] = backends, jax.default_backend()
    try:
        import jax.extend.core  # noqa: F401
        out["extend"] = True
    except Exception:
        out["extend"] = False
    out["ok"] = True
except BaseException as err:
    out["error"] = (type(err).__name__ + ": " + str(err)).splitlines()[0][:300]
print(json.dumps(out))
"""


def parse_version(text: str | None) -> tuple[int, ...]:
    """'0.12.0.1' -> (0, 12, 0, 1); '0.13.0rc1' -> (0, 13, 0); junk -> ()."""
    parts = []
    for piece in (text or "").split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.end() != len(piece):
            break
    return tuple(parts)


def _pad(v: tuple[int, ...], n: int = 4) -> tuple[int, ...]:
    return v + (0,) * (n - len(v))


def in_range(version: str | None, low: str | None, high: str | None) -> bool:
    """low <= version <= high (both inclusive, either may be None)."""
    v = parse_version(version)
    if not v:
        return False
    if low is not None and _pad(v) < _pad(parse_version(low)):
        return False
    return not (high is not None and _pad(v) > _pad(parse_version(high)))


# -- facts ------------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _plugins() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name.startswith(PLUGIN_PREFIXES):
            found[name] = dist.version
    return dict(sorted(found.items()))


def _tool(name: str) -> dict[str, str] | None:
    path = shutil.which(name)
    if path is None:
        return None
    try:
        result = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
        text = result.stdout + result.stderr
    except (OSError, subprocess.SubprocessError) as err:
        return {"path": path, "version": "", "error": type(err).__name__}
    # nvcc prints "release 13.0, V13.0.88"; the others put the version first.
    match = re.search(r"release (\d+(?:\.\d+)+)", text) or re.search(r"(\d+\.\d+(?:\.\d+)*)", text)
    return {"path": path, "version": match.group(1) if match else ""}


def _probe_jax(timeout: float) -> dict[str, Any]:
    try:
        result = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"importing jax took more than {timeout:.0f} s"}
    except OSError as err:
        return {"ok": False, "error": f"could not start {sys.executable}: {err.strerror}"}
    lines = result.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        return {"ok": False, "error": f"the JAX probe crashed: {tail[:300]}"}


def _templates_ok() -> str | None:
    """None if every registered template is where the kit expects it, else the problem."""
    try:
        for rung in available():
            if not (template_dir(rung) / "cookiecutter.json").is_file():
                return f"the template for {rung.name} is missing; reinstall jax-ladder"
    except FileNotFoundError as err:
        return str(err)
    return None


def gather(timeout: float = 60.0) -> dict[str, Any]:
    """Everything `assess` needs, as plain JSON-able data."""
    with ThreadPoolExecutor(max_workers=len(TOOLS) + 1) as pool:
        probe = pool.submit(_probe_jax, timeout)
        tools = {name: pool.submit(_tool, name) for name in TOOLS}
        packages = {name: _dist_version(name) for name in PACKAGES}
        facts = {
            "kit": __version__,
            "python": ".".join(map(str, sys.version_info[:3])),
            "executable": sys.executable,
            "packages": packages,
            "plugins": _plugins(),
            "env": {k: os.environ.get(k) for k in ("XLA_FLAGS", "JAX_PLATFORMS")},
            "templates_problem": _templates_ok(),
            "tools": {name: future.result() for name, future in tools.items()},
            "jax": probe.result(),
        }
    return facts


# -- assessment ------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownProblem:
    """A problem of some installed versions. `applies(facts)` narrows it further;
    `fixed(facts)` says the workaround is already in place."""

    id: str
    package: str
    low: str | None  # inclusive; None: no lower bound
    high: str | None  # inclusive; None: no upper bound
    text: str
    workaround: str = ""
    applies: Callable[[dict], bool] = lambda facts: True
    fixed: Callable[[dict], bool] = lambda facts: False

    def hits(self, facts: dict) -> bool:
        version = facts["packages"].get(self.package)
        return in_range(version, self.low, self.high) and self.applies(facts)


def _backends(facts: dict) -> dict[str, Any]:
    backends = facts["jax"].get("backends") or {}
    return {k: v for k, v in backends.items() if isinstance(v, list)}


def _has_gpu(facts: dict) -> bool:
    return any(p in ("gpu", "cuda", "rocm") for p in _backends(facts))


def _plugin_mismatch(facts: dict) -> list[str]:
    jaxlib = facts["packages"].get("jaxlib")
    return [
        f"{name} {version}"
        for name, version in facts["plugins"].items()
        if not name.startswith("libtpu")
        and _pad(parse_version(version)) != _pad(parse_version(jaxlib))
    ]


KNOWN_PROBLEMS: tuple[KnownProblem, ...] = (
    KnownProblem(
        "xla-cpu-ynn-grad",
        "jaxlib",
        "0.11.1",
        "0.12.0.1",
        "XLA:CPU miscompiles jax.jit(jax.grad(f)) of an RMSNorm-like reduction over the last "
        "axis (x * lax.rsqrt(mean(x**2) + eps)) at >= 4096 rows: float32, about 99% of rows "
        "wrong, no error. Eager and forward passes are right; check jitted references against "
        "float64 NumPy.",
        f"export XLA_FLAGS={YNN_FLAG}",
        fixed=lambda facts: YNN_FLAG in (facts["env"].get("XLA_FLAGS") or ""),
    ),
    KnownProblem(
        "jax-untested",
        "jax",
        "0.13",
        None,
        "jax is newer than the kit's supported range (>=0.12,<0.13); the templates pin "
        "that range and were tested on 0.12.0.1.",
        "pip install 'jax>=0.12,<0.13'",
    ),
    KnownProblem(
        "jax-jaxlib-skew",
        "jax",
        None,
        None,
        "jax and jaxlib come from different releases; they are tested together only at "
        "equal versions.",
        "pip install -U 'jax==X' 'jaxlib==X' with one X",
        applies=lambda facts: (
            _pad(parse_version(facts["packages"].get("jax")))[:2]
            != _pad(parse_version(facts["packages"].get("jaxlib")))[:2]
        ),
    ),
    KnownProblem(
        "plugin-skew",
        "jaxlib",
        None,
        None,
        "a PJRT plugin's version differs from jaxlib's; the backend may fail to initialise "
        "or be skipped.",
        "reinstall the plugin for this jaxlib, e.g. pip install -U 'jax[cuda13]'",
        applies=lambda facts: bool(_plugin_mismatch(facts)),
    ),
    KnownProblem(
        "pallas-triton",
        "jax",
        "0.11",
        None,
        "the Pallas Triton backend is deprecated and warns when lowering; write GPU kernels "
        "for Mosaic GPU (Hopper, sm_90a).",
        applies=_has_gpu,
    ),
    KnownProblem(
        "no-flatbuffers",
        "jax",
        None,
        None,
        "flatbuffers is not installed: jax.export can lower but not serialize "
        "(ImportError: Please install 'flatbuffers').",
        "pip install flatbuffers",
        applies=lambda facts: facts["packages"].get("flatbuffers") is None,
    ),
)


@dataclass
class Report:
    facts: dict
    rungs: list[tuple[int, str, str, str]] = field(default_factory=list)  # step, name, status, why
    warnings: list[tuple[KnownProblem, bool]] = field(default_factory=list)  # (problem, fixed)
    fatal: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.fatal


def _fatal(facts: dict) -> list[str]:
    problems = []
    if parse_version(facts["python"]) < MIN_PYTHON:
        problems.append(f"Python {facts['python']} is too old; the kit needs Python >= 3.12")
    jax = facts["packages"].get("jax")
    if jax is None:
        problems.append("jax is not installed: pip install 'jax>=0.12,<0.13'")
    elif _pad(parse_version(jax)) < _pad(SUPPORTED_JAX[0]):
        problems.append(f"jax {jax} is too old; the kit needs jax>=0.12,<0.13")
    if facts["packages"].get("jaxlib") is None:
        problems.append("jaxlib is not installed: pip install 'jax>=0.12,<0.13'")
    if jax is not None and not facts["jax"].get("ok"):
        problems.append(f"jax does not import: {facts['jax'].get('error', 'unknown error')}")
    if facts["packages"].get("cookiecutter") is None:
        problems.append("cookiecutter is not installed: pip install cookiecutter")
    if facts.get("templates_problem"):
        problems.append(facts["templates_problem"])
    return problems


def _device_count(facts: dict) -> int:
    return sum(len(devs) for devs in _backends(facts).values())


def _rung_status(name: str, facts: dict) -> tuple[str, str]:
    """(status, why) for one rung here."""
    if not facts["jax"].get("ok"):
        return CANNOT, "jax does not import"
    backends = _backends(facts)
    tools, packages = facts["tools"], facts["packages"]
    if name in ("plain-jax", "transforms"):
        return RUNS, f"on {', '.join(backends) or 'no backend'}"
    if name == "custom-vjp":
        return RUNS, "custom_jvp/custom_vjp are plain JAX"
    if name == "memory-and-sharding":
        n = _device_count(facts)
        if n > 1:
            return RUNS, f"{n} devices"
        return RUNS, "1 device; simulate 8: --xla_force_host_platform_device_count=8"
    if name == "export":
        if packages.get("flatbuffers") is None:
            return LOWER_ONLY, "serialization needs flatbuffers (pip install flatbuffers)"
        return RUNS, "serializes and reloads; lowers for cpu, cuda and tpu"
    if name == "custom-partitioning":
        n = _device_count(facts)
        where = f"{n} devices" if n > 1 else "simulated CPU devices"
        return RUNS, f"Shardy rules; multi-device tests on {where}"
    if name == "pallas":
        if "tpu" in backends:
            return RUNS, "TPU (Mosaic)"
        gpus = [d for p in ("gpu", "cuda") for d in backends.get(p, [])]
        if gpus:
            caps = {str(d.get("compute_capability") or "") for d in gpus}
            if any(parse_version(c) >= (9, 0) for c in caps):
                return RUNS, "Mosaic GPU (sm_90a); interpret mode and TPU lowering too"
            return RUNS, (
                f"GPU compute capability {', '.join(sorted(caps))}: Triton (deprecated) only; "
                "Mosaic GPU needs Hopper"
            )
        return INTERPRET_ONLY, "interpret mode; lowers for TPU and Mosaic GPU (no device)"
    if name == "ffi":
        cxx = next((c for c in CXX if tools.get(c)), None)
        cmake = tools.get("cmake")
        missing = []
        if cxx is None:
            missing.append("a C++ compiler")
        if cmake is None:
            missing.append("CMake")
        elif parse_version(cmake.get("version")) < MIN_CMAKE:
            missing.append(f"CMake >= 3.18 (found {cmake.get('version') or 'unknown'})")
        for package in ("nanobind", "scikit-build-core"):
            if packages.get(package) is None:
                missing.append(package)
        if missing:
            return CANNOT, f"needs {', '.join(missing)}"
        if tools.get("nvcc"):
            gpu = "nvcc and a GPU" if _has_gpu(facts) else "nvcc found, no GPU to run it"
        else:
            gpu = "needs nvcc"
        return RUNS, f"CPU handler ({cxx}, cmake); CUDA handler: {gpu}"
    if name == "internals":
        if facts["jax"].get("extend"):
            return RUNS, "jax.extend imports; see `jax-ladder locate`"
        return CANNOT, "jax.extend does not import"
    return RUNS, "no specific check for this rung"


def assess(facts: dict) -> Report:
    report = Report(facts, fatal=_fatal(facts))
    for rung in LADDER:
        status, why = _rung_status(rung.name, facts)
        report.rungs.append((rung.step, rung.name, status, why))
    for problem in KNOWN_PROBLEMS:
        if problem.hits(facts):
            report.warnings.append((problem, problem.fixed(facts)))
    return report


# -- output --------------------------------------------------------------------------


def _fmt_tool(name: str, info: dict | None, named: bool = True) -> str:
    label = f"{name} " if named else ""
    if info is None:
        return f"{label}not found"
    return f"{label}{info.get('version') or '(version unknown)'} ({info['path']})"


def render(report: Report) -> str:
    f = report.facts
    pk = f["packages"]
    probe = f["jax"]

    def version(name: str) -> str:
        return pk.get(name) or "not installed"

    lines = [f"jax-ladder {f['kit']} doctor", ""]
    lines.append(f"{'python':<12}{f['python']} ({f['executable']})")
    lines.append(f"{'jax':<12}{version('jax')} (the kit supports >=0.12,<0.13)")
    lines.append(f"{'jaxlib':<12}{version('jaxlib')}")
    plugins = ", ".join(f"{n} {v}" for n, v in f["plugins"].items()) or "none"
    lines.append(f"{'plugins':<12}{plugins}")
    if probe.get("ok"):
        default = probe.get("default_backend")
        for platform, devices in (probe.get("backends") or {}).items():
            label = f"{platform}{' (default)' if platform == default else ''}"
            if isinstance(devices, list):
                kinds = sorted({d["kind"] for d in devices})
                desc = (
                    f"{len(devices)} device{'s' if len(devices) != 1 else ''} ({', '.join(kinds)})"
                )
            else:
                desc = f"failed: {devices}"
            lines.append(f"{'backend':<12}{label}: {desc}")
    else:
        lines.append(f"{'backend':<12}unknown: {probe.get('error')}")
    pad = " " * 12
    others = ", ".join(f"{n} {version(n)}" for n in PACKAGES if n not in ("jax", "jaxlib"))
    lines += textwrap.wrap(others, 92, initial_indent=f"{'packages':<12}", subsequent_indent=pad)
    compilers = ", ".join(_fmt_tool(n, f["tools"].get(n)) for n in CXX)
    lines += textwrap.wrap(
        compilers, 92, initial_indent=f"{'compilers':<12}", subsequent_indent=pad
    )
    for name in ("cmake", "nvcc"):
        lines.append(f"{name:<12}{_fmt_tool(name, f['tools'].get(name), named=False)}")
    env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in f["env"].items())
    lines.append(f"{'env':<12}{env}")

    lines += ["", "Rungs here (* = the kit has a template):"]
    templates = {r.name for r in available()}
    for step, name, status, why in report.rungs:
        mark = "*" if name in templates else " "
        lines.append(f"{mark} {step}. {name:<20} {status:<15} {why}")

    if report.warnings:
        lines += ["", "Known problems of the installed versions:"]
        for problem, fixed in report.warnings:
            version_ = pk.get(problem.package) or "?"
            head = f"  ! [{problem.id}] {problem.package} {version_}: {problem.text}"
            lines += textwrap.wrap(head, 92, subsequent_indent="    ")
            if problem.id == "plugin-skew":
                lines.append(f"    plugins: {', '.join(_plugin_mismatch(f))}")
            if fixed:
                lines.append("    workaround in place: " + problem.workaround.split(" ", 1)[-1])
            elif problem.workaround:
                lines.append(f"    workaround: {problem.workaround}")
    if report.fatal:
        lines += ["", "The kit cannot work here:"]
        lines += [f"  x {problem}" for problem in report.fatal]
    else:
        active = sum(1 for _, fixed in report.warnings if not fixed)
        lines += ["", f"The kit works here ({active} warning(s))."]
    return "\n".join(lines)


def to_json(report: Report) -> dict:
    return {
        "ok": report.ok,
        "facts": report.facts,
        "rungs": [
            {"step": step, "name": name, "status": status, "why": why}
            for step, name, status, why in report.rungs
        ],
        "warnings": [
            {
                "id": p.id,
                "package": p.package,
                "text": p.text,
                "workaround": p.workaround,
                "workaround_in_place": fixed,
            }
            for p, fixed in report.warnings
        ],
        "fatal": report.fatal,
    }
