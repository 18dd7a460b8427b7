"""`jax-ladder doctor`: what is installed here, what each rung can do here, and
the known problems of the installed versions.

`gather()` (in `doctor_facts`) collects `Facts`. `assess(facts)` turns them into
a `Report`: one `Verdict` per rung (`RUNG_CHECKS`, one small function per rung),
the `KNOWN_PROBLEMS` that hit (PEP 440 version ranges, via `packaging`) and
fatal problems. It is pure, so the tests feed it made-up facts. Only a fatal
problem (the kit itself cannot work) makes the command exit non-zero.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from jax_ladder.doctor_facts import (
    LABEL,
    WIDTH,
    Facts,
    at_least,
    below_range,
    render_facts,
    within,
)
from jax_ladder.doctor_facts import gather as gather  # re-exported: the CLI calls doctor.gather
from jax_ladder.rungs import LADDER, available
from jax_ladder.runner import BUILD_TOOLS, install_build_tools
from jax_ladder.versions import JAX_SPEC, JAX_TESTED, PYTHON_OLDEST

SUPPORTED_JAX = SpecifierSet(JAX_SPEC)
MIN_PYTHON = Version(PYTHON_OLDEST)
MIN_CMAKE = Version("3.18")  # the kit's and the FFI template's CMakeLists.txt
MOSAIC_GPU = Version("9.0")  # compute capability: Hopper (sm_90a)
YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"

RUNS, LOWER_ONLY, INTERPRET_ONLY, CANNOT = "runs", "lower only", "interpret only", "cannot"


# -- known problems ------------------------------------------------------------------


@dataclass(frozen=True)
class Workaround:
    """What to do about a known problem: `command`. A workaround that is one `flag`
    in the environment variable `env` is recognised once it is in place."""

    command: str
    env: str = ""
    flag: str = ""

    @classmethod
    def env_flag(cls, env: str, flag: str) -> Workaround:
        return cls(f"export {env}={flag}", env, flag)

    @property
    def setting(self) -> str:
        return f"{self.env}={self.flag}"

    def in_place(self, facts: Facts) -> bool:
        return bool(self.flag) and self.flag in (facts.env.get(self.env) or "")


def _always(facts: Facts) -> bool:
    return True


@dataclass(frozen=True)
class KnownProblem:
    """A problem of the installed `package` when its version is in `versions` (a PEP 440
    specifier set; "" for any version) and `applies(facts)`. `details(facts)`, when
    given, names what is affected, on a line of its own under `text`."""

    id: str
    package: str
    versions: str
    text: str
    workaround: Workaround | None = None
    applies: Callable[[Facts], bool] = _always
    details: Callable[[Facts], str] | None = None

    def hits(self, facts: Facts) -> bool:
        installed = facts.packages.get(self.package)
        return within(installed, SpecifierSet(self.versions)) and self.applies(facts)


def _jax_newer_than_supported(facts: Facts) -> bool:
    jax = facts.installed("jax")
    return (
        jax is not None
        and not SUPPORTED_JAX.contains(jax, prereleases=True)
        and not below_range(jax, SUPPORTED_JAX)
    )


def _jax_jaxlib_skew(facts: Facts) -> bool:
    """jax and jaxlib from different minor releases (or one of them unreadable)."""
    jax, jaxlib = facts.installed("jax"), facts.installed("jaxlib")
    if jax is None or jaxlib is None:
        return True
    return (jax.major, jax.minor) != (jaxlib.major, jaxlib.minor)


KNOWN_PROBLEMS: tuple[KnownProblem, ...] = (
    KnownProblem(
        id="xla-cpu-ynn-grad",
        package="jaxlib",
        versions=">=0.11.1,<=0.12.1",
        text="XLA:CPU miscompiles jax.jit(jax.grad(f)) of an RMSNorm-like reduction over the "
        "last axis (x * lax.rsqrt(mean(x**2) + eps)) at >= 4096 rows: float32, about 99% of "
        "rows wrong, no error. Eager and forward passes are right; check jitted references "
        "against float64 NumPy.",
        workaround=Workaround.env_flag("XLA_FLAGS", YNN_FLAG),
    ),
    KnownProblem(
        id="jax-untested",
        package="jax",
        versions="",
        applies=_jax_newer_than_supported,
        text=f"jax is newer than the kit's supported range ({JAX_SPEC}); the templates pin "
        f"that range and were tested on {JAX_TESTED}.",
        workaround=Workaround(f"pip install 'jax{JAX_SPEC}'"),
    ),
    KnownProblem(
        id="jax-jaxlib-skew",
        package="jax",
        versions="",
        applies=_jax_jaxlib_skew,
        text="jax and jaxlib come from different releases; they are tested together only at "
        "equal versions.",
        workaround=Workaround("pip install -U 'jax==X' 'jaxlib==X' with one X"),
    ),
    KnownProblem(
        id="plugin-skew",
        package="jaxlib",
        versions="",
        applies=lambda facts: bool(facts.mismatched_plugins),
        details=lambda facts: "plugins: " + ", ".join(facts.mismatched_plugins),
        text="a PJRT plugin's version differs from jaxlib's; the backend may fail to "
        "initialise or be skipped.",
        workaround=Workaround(
            "reinstall the plugin for this jaxlib, e.g. pip install -U 'jax[cuda13]'"
        ),
    ),
    KnownProblem(
        id="pallas-triton",
        package="jax",
        versions=">=0.11",
        applies=lambda facts: facts.has_gpu,
        text="the Pallas Triton backend is deprecated and warns when lowering; write GPU "
        "kernels for Mosaic GPU (Hopper, sm_90a).",
    ),
    KnownProblem(
        id="no-flatbuffers",
        package="jax",
        versions="",
        applies=lambda facts: facts.packages.get("flatbuffers") is None,
        text="flatbuffers is not installed: jax.export can lower but not serialize "
        "(ImportError: Please install 'flatbuffers').",
        workaround=Workaround("pip install flatbuffers"),
    ),
)


# -- per-rung verdicts -----------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What one rung can do here (RUNS, LOWER_ONLY, INTERPRET_ONLY or CANNOT), and why."""

    status: str
    why: str


def _on_backends(facts: Facts) -> Verdict:
    return Verdict(RUNS, f"on {', '.join(facts.jax.working_backends) or 'no backend'}")


def _memory_and_sharding(facts: Facts) -> Verdict:
    n = facts.device_count
    if n > 1:
        return Verdict(RUNS, f"{n} devices")
    return Verdict(RUNS, "1 device; simulate 8: --xla_force_host_platform_device_count=8")


def _custom_vjp(facts: Facts) -> Verdict:
    return Verdict(RUNS, "custom_jvp/custom_vjp are plain JAX")


def _export(facts: Facts) -> Verdict:
    if facts.packages.get("flatbuffers") is None:
        return Verdict(LOWER_ONLY, "serialization needs flatbuffers (pip install flatbuffers)")
    return Verdict(RUNS, "serializes and reloads; lowers for cpu, cuda and tpu")


def _custom_partitioning(facts: Facts) -> Verdict:
    n = facts.device_count
    where = f"{n} devices" if n > 1 else "simulated CPU devices"
    return Verdict(RUNS, f"Shardy rules; multi-device tests on {where}")


def _pallas(facts: Facts) -> Verdict:
    backends = facts.jax.working_backends
    if "tpu" in backends:
        return Verdict(RUNS, "TPU (Mosaic)")
    gpus = [d for p in ("gpu", "cuda") for d in backends.get(p, [])]
    if not gpus:
        return Verdict(INTERPRET_ONLY, "interpret mode; lowers for TPU and Mosaic GPU (no device)")
    caps = sorted({str(d.compute_capability or "") for d in gpus})
    if any(at_least(cap, MOSAIC_GPU) for cap in caps):
        return Verdict(RUNS, "Mosaic GPU (sm_90a); interpret mode and TPU lowering too")
    return Verdict(
        RUNS,
        f"GPU compute capability {', '.join(caps)}: Triton (deprecated) only; "
        "Mosaic GPU needs Hopper",
    )


@dataclass(frozen=True)
class FfiBuild:
    """What building the ffi rung's project (CMakeLists.txt, scikit-build-core,
    nanobind) finds here. A C++ compiler and CMake come from the machine either
    way; nanobind and scikit-build-core come from this environment only for an
    in-place build (`jax-ladder demo`, `pip install --no-build-isolation`), while
    a project's own `pip install .` gets them by build isolation."""

    compiler: str | None  # the first C++ compiler found
    cmake: str | None  # its version ("" when unreadable); None when not found
    build_tools: dict[str, str | None]  # distribution -> version here, None if not installed

    @property
    def cmake_ok(self) -> bool:
        return at_least(self.cmake, MIN_CMAKE)

    @property
    def missing_build_tools(self) -> list[str]:
        return [name for name, installed in self.build_tools.items() if installed is None]

    def to_json(self) -> dict[str, Any]:
        return {
            "compiler": self.compiler,
            "cmake": self.cmake,
            "cmake_ok": self.cmake_ok,
            "build_tools": self.build_tools,
            "in_place": not self.missing_build_tools,
        }


def ffi_build(facts: Facts) -> FfiBuild:
    cmake = facts.tools.get("cmake")
    return FfiBuild(
        compiler=facts.compiler,
        cmake=None if cmake is None else cmake.version,
        # The runner's list, so the doctor asks about what the demo's build imports.
        build_tools={name: facts.packages.get(name) for name, _ in BUILD_TOOLS.values()},
    )


def _ffi_missing(build: FfiBuild) -> list[str]:
    """What the machine lacks for any ffi build (isolated or not)."""
    missing = [] if build.compiler else ["a C++ compiler"]
    if build.cmake is None:
        missing.append("CMake")
    elif not build.cmake_ok:
        missing.append(f"CMake >= {MIN_CMAKE} (found {build.cmake or 'unknown'})")
    return missing


def _ffi(facts: Facts) -> Verdict:
    build = ffi_build(facts)
    missing = _ffi_missing(build)
    if missing:
        return Verdict(CANNOT, f"needs {', '.join(missing)}")
    if facts.tools.get("nvcc") is None:
        gpu = "needs nvcc"
    else:
        gpu = "nvcc and a GPU" if facts.has_gpu else "nvcc found, no GPU to run it"
    why = f"CPU handler ({facts.compiler}, cmake); CUDA handler: {gpu}"
    # Not a CANNOT: the project's `pip install .` gets them by build isolation.
    if build.missing_build_tools:
        why += f"; {', '.join(build.missing_build_tools)} by build isolation"
    return Verdict(RUNS, why)


def _internals(facts: Facts) -> Verdict:
    if facts.jax.extend:
        return Verdict(RUNS, "jax.extend imports; see `jax-ladder locate`")
    return Verdict(CANNOT, "jax.extend does not import")


# Keyed by the registry's rung names; tests/test_doctor.py holds the keys to LADDER.
RUNG_CHECKS: dict[str, Callable[[Facts], Verdict]] = {
    "plain-jax": _on_backends,
    "transforms": _on_backends,
    "memory-and-sharding": _memory_and_sharding,
    "custom-vjp": _custom_vjp,
    "export": _export,
    "custom-partitioning": _custom_partitioning,
    "pallas": _pallas,
    "ffi": _ffi,
    "internals": _internals,
}


def rung_verdict(name: str, facts: Facts) -> Verdict:
    if not facts.jax.ok:
        return Verdict(CANNOT, "jax does not import")
    check = RUNG_CHECKS.get(name)
    return check(facts) if check else Verdict(RUNS, "no specific check for this rung")


# -- the report ------------------------------------------------------------------------


@dataclass(frozen=True)
class RungVerdict:
    step: int
    name: str
    verdict: Verdict


@dataclass(frozen=True)
class Finding:
    """A known problem that hits here."""

    problem: KnownProblem
    version: str  # of problem.package, as installed
    workaround_in_place: bool
    details: str = ""


@dataclass(frozen=True)
class Report:
    facts: Facts
    rungs: list[RungVerdict]
    warnings: list[Finding]
    fatal: list[str]

    @property
    def ok(self) -> bool:
        return not self.fatal


def _jax_fatal(facts: Facts) -> list[str]:
    install = f"pip install 'jax{JAX_SPEC}'"
    jax_text = facts.packages.get("jax")
    jax = facts.installed("jax")
    problems = []
    if jax_text is None:
        problems.append(f"jax is not installed: {install}")
    elif jax is None or below_range(jax, SUPPORTED_JAX):
        problems.append(f"jax {jax_text} is too old; the kit needs jax{JAX_SPEC}")
    if facts.packages.get("jaxlib") is None:
        problems.append(f"jaxlib is not installed: {install}")
    if jax_text is not None and not facts.jax.ok:
        problems.append(f"jax does not import: {facts.jax.error or 'unknown error'}")
    return problems


def _fatal(facts: Facts) -> list[str]:
    problems = []
    if not at_least(facts.python, MIN_PYTHON):
        problems.append(f"Python {facts.python} is too old; the kit needs Python >= {MIN_PYTHON}")
    problems += _jax_fatal(facts)
    if facts.packages.get("cookiecutter") is None:
        problems.append("cookiecutter is not installed: pip install cookiecutter")
    if facts.templates_problem:
        problems.append(facts.templates_problem)
    return problems


def _finding(problem: KnownProblem, facts: Facts) -> Finding:
    return Finding(
        problem,
        version=facts.packages.get(problem.package) or "?",
        workaround_in_place=problem.workaround is not None and problem.workaround.in_place(facts),
        details=problem.details(facts) if problem.details else "",
    )


def assess(facts: Facts) -> Report:
    return Report(
        facts,
        rungs=[RungVerdict(r.step, r.name, rung_verdict(r.name, facts)) for r in LADDER],
        warnings=[_finding(p, facts) for p in KNOWN_PROBLEMS if p.hits(facts)],
        fatal=_fatal(facts),
    )


# -- output ----------------------------------------------------------------------------


def _render_rungs(rungs: list[RungVerdict]) -> list[str]:
    templates = {r.name for r in available()}
    return ["Rungs here (* = the kit has a template):"] + [
        f"{'*' if r.name in templates else ' '} {r.step}. {r.name:<20} "
        f"{r.verdict.status:<15} {r.verdict.why}"
        for r in rungs
    ]


def _render_finding(finding: Finding) -> list[str]:
    problem, workaround = finding.problem, finding.problem.workaround
    head = f"  ! [{problem.id}] {problem.package} {finding.version}: {problem.text}"
    lines = textwrap.wrap(head, WIDTH, subsequent_indent="    ")
    if finding.details:
        lines.append(f"    {finding.details}")
    if workaround is not None and finding.workaround_in_place:
        lines.append(f"    workaround in place: {workaround.setting}")
    elif workaround is not None:
        lines.append(f"    workaround: {workaround.command}")
    return lines


def _render_outcome(report: Report) -> list[str]:
    if report.fatal:
        return ["The kit cannot work here:", *(f"  x {problem}" for problem in report.fatal)]
    active = sum(not finding.workaround_in_place for finding in report.warnings)
    return [f"The kit works here ({active} warning(s))."]


def render_ffi_build(build: FfiBuild) -> list[str]:
    """The doctor's `ffi` fact: what building the ffi rung's project needs, and
    what of it is here."""
    compiler = f"{build.compiler} found" if build.compiler else "none found"
    if build.cmake is None:
        cmake = "not found"
    elif build.cmake_ok:
        cmake = build.cmake
    else:
        cmake = f"{build.cmake or 'version unknown'}: too old"
    in_place = "in-place builds (jax-ladder demo, --no-build-isolation)"
    missing = build.missing_build_tools
    if not missing:
        tools = f"installed, for {in_place}"
    else:
        tools = (
            f"{' and '.join(missing)} not installed, so only isolated builds (a project's "
            f"pip install .) get them; {in_place} need {install_build_tools(missing)}"
        )
    text = (
        f"needs a C++ compiler ({compiler}) and CMake >= {MIN_CMAKE} ({cmake}); "
        f"nanobind and scikit-build-core: {tools}"
    )
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"{'ffi':<{LABEL}}",
        subsequent_indent=" " * LABEL,
        break_on_hyphens=False,  # keeps --no-build-isolation and package names whole
    )


def render(report: Report) -> str:
    lines = [f"jax-ladder {report.facts.kit} doctor", ""]
    lines += [*render_facts(report.facts), *render_ffi_build(ffi_build(report.facts))]
    lines += ["", *_render_rungs(report.rungs)]
    if report.warnings:
        lines += ["", "Known problems of the installed versions:"]
        for finding in report.warnings:
            lines += _render_finding(finding)
    lines += ["", *_render_outcome(report)]
    return "\n".join(lines)


def to_json(report: Report) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "facts": report.facts.to_json(),
        "ffi_build": ffi_build(report.facts).to_json(),
        "rungs": [
            {"step": r.step, "name": r.name, "status": r.verdict.status, "why": r.verdict.why}
            for r in report.rungs
        ],
        "warnings": [
            {
                "id": f.problem.id,
                "package": f.problem.package,
                "text": f.problem.text,
                "workaround": f.problem.workaround.command if f.problem.workaround else "",
                "workaround_in_place": f.workaround_in_place,
            }
            for f in report.warnings
        ],
        "fatal": report.fatal,
    }
