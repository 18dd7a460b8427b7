"""The declaration of the op's signature, from which tests/conformance.py
builds every transformation x sharding x platform cell (tests/test_conformance.py)
and the README's support table (tests/support_table.py).

Adapting the starter to your own op: change this file and your op, not the
conformance module. Name the arguments and their axes, the sizes the cells
use, which axes are batch-like (vmap over them, shard them with no
communication), and for each cell the op does not support, the error it
raises and what to use instead.
"""

from {{ cookiecutter.package_name }} import top_k, top_k_reference

from conformance import Arg, OpSpec, Refuse
from oracle import top_k_f64

# k is static (it fixes the output shape): the cells call the op at one k.
K = 3

SPEC = OpSpec(
    name="top_k",
    op=lambda x: top_k(x, K),
    reference=lambda x: top_k_reference(x, K),
    oracle=lambda x: top_k_f64(x, K),
    args=(Arg("x", ("b", "n")),),
    # Values, and the integer indices (not differentiated).
    outputs=(("b", "k"), ("b", "k")),
    sizes={"b": 8, "n": 16, "k": K},
    batch_axes=("b",),
    shard_map_axes=("b",),
    symbolic_axis="b",
    platforms={"cpu": "", "cuda": "", "tpu": ""},
)
