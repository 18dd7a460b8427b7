"""The facts `jax-ladder doctor` reads about this environment: how it gathers
them, reads their versions and shows them.

Package versions come from `importlib.metadata` (nothing is imported); backends
and devices from a JAX subprocess with a timeout, so a broken plugin cannot hang
or crash the doctor; tool versions from `<tool> --version`, in parallel. The
dataclasses here are all that `doctor.assess` reads, so tests build them by hand.
Versions are compared as PEP 440 versions (`packaging`), as pip compares them.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from jax_ladder import __version__
from jax_ladder.rungs import available, template_dir
from jax_ladder.versions import JAX_SPEC

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
ENV_VARS = ("XLA_FLAGS", "JAX_PLATFORMS")

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


def version(text: str | None) -> Version | None:
    """The PEP 440 version in `text`; None when not installed or not a version."""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def within(text: str | None, spec: SpecifierSet) -> bool:
    """`text` is a version in `spec`. Pre-releases and dev builds count: the doctor
    describes what is installed, it does not choose what to install."""
    installed = version(text)
    return installed is not None and spec.contains(installed, prereleases=True)


def at_least(text: str | None, minimum: Version) -> bool:
    """`text` is a version, `minimum` or newer."""
    installed = version(text)
    return installed is not None and installed >= minimum


def below_range(installed: Version, spec: SpecifierSet) -> bool:
    """`installed` fails one of `spec`'s lower bounds (so it is too old, not too new)."""
    return any(
        s.operator in (">", ">=") and not s.contains(installed, prereleases=True) for s in spec
    )


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    """The JSON form leaves out what was never found, as the probe itself does."""
    return {key: value for key, value in data.items() if value is not None}


@dataclass(frozen=True)
class Device:
    kind: str
    id: int
    compute_capability: str | None = None  # GPUs only, e.g. "9.0"


@dataclass(frozen=True)
class JaxProbe:
    """What the JAX subprocess found. Fields it never reached stay None."""

    ok: bool
    error: str | None = None
    jax: str | None = None
    jaxlib: str | None = None
    # platform -> its devices, or the first line of why it failed to initialise
    backends: dict[str, list[Device] | str] | None = None
    default_backend: str | None = None
    extend: bool | None = None  # jax.extend.core imports

    @property
    def working_backends(self) -> dict[str, list[Device]]:
        return {p: d for p, d in (self.backends or {}).items() if isinstance(d, list)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JaxProbe:
        backends = data.get("backends")
        if backends is not None:
            backends = {
                platform: devices if isinstance(devices, str) else [Device(**d) for d in devices]
                for platform, devices in backends.items()
            }
        return cls(**{**data, "backends": backends})

    def to_json(self) -> dict[str, Any]:
        return _without_none(asdict(self))


@dataclass(frozen=True)
class Tool:
    path: str
    version: str  # "" when `--version` printed none
    error: str | None = None  # why `--version` could not run

    def to_json(self) -> dict[str, Any]:
        return _without_none(asdict(self))


@dataclass(frozen=True)
class Facts:
    """Everything `doctor.assess` reads. Versions are None when not installed."""

    kit: str
    python: str
    executable: str
    packages: dict[str, str | None]
    plugins: dict[str, str]  # PJRT plugin distribution -> version
    env: dict[str, str | None]
    templates_problem: str | None
    tools: dict[str, Tool | None]
    jax: JaxProbe

    def installed(self, package: str) -> Version | None:
        return version(self.packages.get(package))

    @property
    def device_count(self) -> int:
        return sum(len(devices) for devices in self.jax.working_backends.values())

    @property
    def has_gpu(self) -> bool:
        return any(p in ("gpu", "cuda", "rocm") for p in self.jax.working_backends)

    @property
    def compiler(self) -> str | None:
        """The first C++ compiler found."""
        return next((name for name in CXX if self.tools.get(name)), None)

    @property
    def mismatched_plugins(self) -> list[str]:
        """'name version' of each PJRT plugin whose version differs from jaxlib's."""
        jaxlib = self.installed("jaxlib")
        return [
            f"{name} {plugin}"
            for name, plugin in self.plugins.items()
            if not name.startswith("libtpu") and version(plugin) != jaxlib
        ]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tools"] = {name: tool and tool.to_json() for name, tool in self.tools.items()}
        data["jax"] = self.jax.to_json()
        return data


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _plugins() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        # get_all: the metadata's .get is typed from Python 3.12 on only.
        name = "".join(dist.metadata.get_all("Name", [])[:1]).lower()
        if name.startswith(PLUGIN_PREFIXES):
            found[name] = dist.version
    return dict(sorted(found.items()))


def _tool(name: str) -> Tool | None:
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
    except (OSError, subprocess.SubprocessError) as err:
        return Tool(path, "", error=type(err).__name__)
    text = result.stdout + result.stderr
    # nvcc prints "release 13.0, V13.0.88"; the others put the version first.
    match = re.search(r"release (\d+(?:\.\d+)+)", text) or re.search(r"(\d+\.\d+(?:\.\d+)*)", text)
    return Tool(path, match.group(1) if match else "")


def _probe_jax(timeout: float) -> JaxProbe:
    try:
        result = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return JaxProbe(ok=False, error=f"importing jax took more than {timeout:.0f} s")
    except OSError as err:
        return JaxProbe(ok=False, error=f"could not start {sys.executable}: {err.strerror}")
    lines = result.stdout.strip().splitlines()
    try:
        return JaxProbe.from_json(json.loads(lines[-1]))
    except (IndexError, json.JSONDecodeError, TypeError, AttributeError):
        tail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        return JaxProbe(ok=False, error=f"the JAX probe crashed: {tail[:300]}")


def _templates_problem() -> str | None:
    """None if every registered template is where the kit expects it, else the problem."""
    try:
        for rung in available():
            if not (template_dir(rung) / "cookiecutter.json").is_file():
                return f"the template for {rung.name} is missing; reinstall jax-ladder"
    except FileNotFoundError as err:
        return str(err)
    return None


def gather(timeout: float = 60.0) -> Facts:
    """Everything `doctor.assess` needs; the probe and the tools run in parallel."""
    with ThreadPoolExecutor(max_workers=len(TOOLS) + 1) as pool:
        probe = pool.submit(_probe_jax, timeout)
        tools = {name: pool.submit(_tool, name) for name in TOOLS}
        return Facts(
            kit=__version__,
            python=".".join(map(str, sys.version_info[:3])),
            executable=sys.executable,
            packages={name: _dist_version(name) for name in PACKAGES},
            plugins=_plugins(),
            env={name: os.environ.get(name) for name in ENV_VARS},
            templates_problem=_templates_problem(),
            tools={name: future.result() for name, future in tools.items()},
            jax=probe.result(),
        )


# -- how the doctor shows them ----------------------------------------------------

WIDTH, LABEL = 92, 12  # characters: a report line, a fact's label column


def _line(label: str, value: str) -> str:
    return f"{label:<{LABEL}}{value}"


def _wrapped(label: str, value: str) -> list[str]:
    return textwrap.wrap(
        value, WIDTH, initial_indent=f"{label:<{LABEL}}", subsequent_indent=" " * LABEL
    )


def _fmt_tool(name: str, tool: Tool | None, named: bool = True) -> str:
    label = f"{name} " if named else ""
    if tool is None:
        return f"{label}not found"
    return f"{label}{tool.version or '(version unknown)'} ({tool.path})"


def _describe_devices(devices: list[Device] | str) -> str:
    if isinstance(devices, str):
        return f"failed: {devices}"
    kinds = ", ".join(sorted({d.kind for d in devices}))
    return f"{len(devices)} device{'s' if len(devices) != 1 else ''} ({kinds})"


def _render_backends(probe: JaxProbe) -> list[str]:
    if not probe.ok:
        return [_line("backend", f"unknown: {probe.error}")]
    return [
        _line(
            "backend",
            f"{platform}{' (default)' if platform == probe.default_backend else ''}: "
            f"{_describe_devices(devices)}",
        )
        for platform, devices in (probe.backends or {}).items()
    ]


def render_facts(f: Facts) -> list[str]:
    """The facts part of `jax-ladder doctor`'s report, one line per fact."""

    def installed(name: str) -> str:
        return f.packages.get(name) or "not installed"

    others = ", ".join(f"{n} {installed(n)}" for n in PACKAGES if n not in ("jax", "jaxlib"))
    compilers = ", ".join(_fmt_tool(n, f.tools.get(n)) for n in CXX)
    env = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in f.env.items())
    return [
        _line("python", f"{f.python} ({f.executable})"),
        _line("jax", f"{installed('jax')} (the kit supports {JAX_SPEC})"),
        _line("jaxlib", installed("jaxlib")),
        _line("plugins", ", ".join(f"{n} {v}" for n, v in f.plugins.items()) or "none"),
        *_render_backends(f.jax),
        *_wrapped("packages", others),
        *_wrapped("compilers", compilers),
        *(_line(n, _fmt_tool(n, f.tools.get(n), named=False)) for n in ("cmake", "nvcc")),
        _line("env", env),
    ]
