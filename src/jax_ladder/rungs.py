"""The ladder: one entry per rung. A rung with a template is one folder under
templates/ plus one entry here; everything else (options, validation, the demo)
is derived from the template's cookiecutter.json."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rung:
    step: int
    name: str
    summary: str
    template: str | None = None  # folder under templates/, None if the kit has none yet
    instead: str = ""  # what to use where the kit has no template


LADDER: tuple[Rung, ...] = (
    Rung(
        1,
        "plain-jax",
        "jit, grad, vmap and jnp: try this first",
        instead="jax.jit / jax.grad / jax.vmap",
    ),
    Rung(
        2,
        "transforms",
        "control flow and other transforms",
        instead="lax.scan / lax.cond / lax.while_loop / jax.lax.map",
    ),
    Rung(
        3,
        "memory-and-sharding",
        "rematerialise, donate buffers, shard across devices",
        template="memory-and-sharding",
    ),
    Rung(
        4,
        "custom-vjp",
        "custom derivatives: fix unstable or wasteful autodiff",
        template="custom-vjp",
    ),
    Rung(
        5,
        "export",
        "serialize a computation for another process or machine (AOT)",
        template="export",
    ),
    Rung(
        6,
        "custom-partitioning",
        "teach the partitioner how an op shards",
        template="custom-partitioning",
    ),
    Rung(7, "pallas", "write a TPU/GPU kernel", template="pallas"),
    Rung(8, "ffi", "call C++/CUDA through the XLA FFI", template="ffi"),
    Rung(
        9,
        "internals",
        "new primitives and JAX internals",
        template="internals",
    ),
)


def by_name(name: str) -> Rung | None:
    return next((r for r in LADDER if r.name == name), None)


def available() -> list[Rung]:
    """Rungs the kit can scaffold, in ladder order."""
    return [r for r in LADDER if r.template]


def _data_dir(kind: str) -> Path:
    """templates/, assets/ or docs/: inside the installed package, else the source tree."""
    installed = Path(__file__).parent / kind
    if installed.is_dir():
        return installed
    source = Path(__file__).resolve().parents[2] / kind
    if source.is_dir():
        return source
    raise FileNotFoundError(f"jax-ladder is installed without its {kind}/ folder; reinstall it")


def template_dir(rung: Rung) -> Path:
    assert rung.template, rung
    return _data_dir("templates") / rung.template


def assets_dir() -> Path:
    return _data_dir("assets")


def docs_dir() -> Path:
    """docs/, holding the reference pages docs/rungs/<step>-<name>.md."""
    return _data_dir("docs")
