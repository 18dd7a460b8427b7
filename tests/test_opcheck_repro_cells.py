"""Shrinking and its repro scripts never crash, whatever the cell (the
grad-grad-explicit-* cells were once taken for grad-<arg>), and an op that
donates its arguments can be shrunk (the draws are copied before the op
consumes them)."""

import sys

import numpy as np
import pytest

from jax_ladder.opcheck import check
from jax_ladder.opcheck.conformance import cell_names
from jax_ladder.opcheck.repro import write_repro

OPS = '''"""Plain JAX, as a user's module."""

import jax
import jax.numpy as jnp


def reference(x, w):
    return jnp.sum(x * w, axis=-1)


def scale_reference(x, w):
    return x * w


def scale_donating(x, w):
    return x * w


# Donates x: the caller's array is deleted by the call.
scale_donating = jax.jit(scale_donating, donate_argnums=0)


def softmax(x):
    return jax.nn.softmax(x, axis=-1)
'''

SPECS = """import repro_cells_ops as ops

from jax_ladder.opcheck import Arg, OpSpec, Ulps

ARGS = (Arg("x", ("b", "n")), Arg("w", ("n",)))
ROWDOT = OpSpec(
    "rowdot", ops.reference, ops.reference, None, ARGS, (("b",),), {"b": 4, "n": 8},
    Ulps(4, 4), Ulps(4, 4), batch_axes=("b",), shard_map_axes=("b",), symbolic_axis="b",
    dtypes=("float32", "bfloat16"),
)
SOFTMAX = OpSpec(
    name="softmax", op=ops.softmax, reference=ops.softmax, oracle=None,
    signature="x[...,n] -> [...,n]", sizes={"n": 8, "...": (2,)},
    tolerance=Ulps(4, 4), gradient_tolerance=Ulps(4, 4),
)
DONATING = OpSpec(
    "scale_donating", ops.scale_donating, ops.scale_reference, None, ARGS, (("b", "n"),),
    {"b": 8, "n": 16}, Ulps(4, 4), Ulps(4, 4), batch_axes=("b",),
)
"""


@pytest.fixture
def declared(tmp_path, monkeypatch):
    (tmp_path / "repro_cells_ops.py").write_text(OPS)
    (tmp_path / "repro_cells_spec.py").write_text(SPECS)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("repro_cells_ops", "repro_cells_spec"):
        sys.modules.pop(name, None)
    import repro_cells_spec

    yield repro_cells_spec
    for name in ("repro_cells_ops", "repro_cells_spec"):
        sys.modules.pop(name, None)


def record_for(spec):
    """A draw of every kind, as the engine notes them: each family's script
    finds what it reads."""
    rng = np.random.default_rng(0)
    sizes = {a: s for a, s in spec.sizes.items() if a != "..."}
    args = [
        rng.standard_normal([sizes.get(a, 2) for a in arg.axes]).astype(np.float32)
        for arg in spec.args
    ]
    batched = [np.stack([a, a], axis=0) for a in args]
    cts = [rng.standard_normal([sizes.get(a, 2) for a in out]).astype(np.float32)
           for out in spec.outputs]  # fmt: skip
    return [
        ("args", args, {}),
        ("cotangents", cts, {}),
        ("vmap", batched, {"in_axes": (0,) * len(args), "out_axes": 0}),
        ("hard", args, {}),
        ("hard", args, {}),
    ]


@pytest.mark.parametrize("name", ["ROWDOT", "SOFTMAX"])
def test_a_repro_script_is_written_for_every_cell(declared, tmp_path, name):
    spec = getattr(declared, name)
    record = record_for(spec)
    cells = cell_names(spec)
    assert any(c.startswith("grad-grad-explicit-") for c in cells)
    for cell in cells:
        path = write_repro(spec, cell, 0, record, f"[{cell}] boom", tmp_path / "repro")
        compile(path.read_text(), str(path), "exec")  # a script Python can run


def test_an_op_that_donates_its_arguments_is_shrunk(declared, tmp_path):
    report = check(declared.DONATING, ["eager"], shrink=True, repro_dir=tmp_path / "repro")
    message = report["eager"].message
    assert report["eager"].outcome == "failed"
    assert "consumed (deleted)" in message.splitlines()[0], message
    assert "shrunk: " in message, message
    assert "Array has been deleted" not in message, message
