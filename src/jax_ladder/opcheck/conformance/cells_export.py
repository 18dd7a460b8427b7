"""The export cells: export-symbolic and lower-<platform>."""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
from jax import export
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .declaration import OpSpec, derived
from .oracles import _outputs, assert_outputs, make_args, oracle
from .results import call_as_declared


def check_export(spec: OpSpec, cell: str, rng: np.random.Generator) -> None:
    args = make_args(spec, rng)
    if cell == "export-symbolic":
        (size,) = export.symbolic_shape(spec.symbolic_axis or "")
        structs = [
            jax.ShapeDtypeStruct(
                tuple(size if d == spec.symbolic_axis else spec.sizes[d] for d in arg.axes),
                a.dtype,
            )
            for arg, a in zip(spec.args, args, strict=True)
        ]
        exported = export.export(
            jax.jit(spec.op), platforms=("cpu",), disabled_checks=list(spec.export_checks)
        )(*structs)
        loaded = export.deserialize(exported.serialize())
        cpu = jax.devices("cpu")[0]
        got = call_as_declared(loaded.call, *jax.device_put(args, cpu))
        assert_outputs(spec, got, oracle(spec, args), "deserialized artifact", args)
        # A different size along the symbolic axis: one artifact serves both.
        smaller = {**spec.sizes, spec.symbolic_axis: 1}
        other = make_args(derived(spec, sizes=smaller), rng)
        got = call_as_declared(loaded.call, *jax.device_put(other, cpu))
        where = f"deserialized artifact, {spec.symbolic_axis} = 1"
        assert_outputs(spec, got, oracle(spec, other), where, other)
        return
    # lower-<platform>: from this (CPU) host, for the target.
    platform = cell.removeprefix("lower-")
    exported = _lowered_for(spec, platform, args)
    assert exported.platforms == (platform,)
    want = [(o.shape, o.dtype) for o in _outputs(jax.eval_shape(spec.op, *args))]
    assert [(o.shape, o.dtype) for o in exported.out_avals] == want
    module = exported.mlir_module()
    marker = spec.platforms[platform]
    if marker:
        # The op's own implementation for that target (its kernel or custom call).
        assert re.search(marker, module), f"no {marker!r} in the {platform} module"
    elif platform != "cpu":
        # No marker: the op claims one program for every platform, so the
        # target's must be the CPU's, whose numbers the other cells check.
        cpu = _lowered_for(spec, "cpu", args).mlir_module()
        assert _program_of(module) == _program_of(cpu), (
            f"the {platform} module differs from the CPU's: declare its marker"
        )
    if platform == "cpu":
        # The serialized CPU program, called here (replicated on as many CPU
        # devices as it was exported for), matches the oracle.
        loaded = export.deserialize(exported.serialize())
        mesh = jax.sharding.Mesh(jax.devices("cpu")[: loaded.nr_devices], ("all",))
        placed = jax.device_put(args, NamedSharding(mesh, P()))
        assert_outputs(
            spec,
            call_as_declared(loaded.call, *placed),
            oracle(spec, args),
            "deserialized artifact",
            args,
        )


def _program_of(module: str) -> str:
    """A module's text without its source locations (where it was traced from)."""
    lines = [line for line in module.splitlines() if not line.startswith("#loc")]
    return "\n".join(re.sub(r"\s*loc\(.*$", "", line) for line in lines)


def _lowered_for(spec: OpSpec, platform: str, args: list[Any]) -> export.Exported:
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    return export.export(
        jax.jit(spec.op), platforms=(platform,), disabled_checks=list(spec.export_checks)
    )(*structs)
