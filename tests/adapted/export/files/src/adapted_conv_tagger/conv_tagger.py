"""What is exported: the function (the model with its weights bound), its
inputs' symbolic signature, and the facts about their sizes that it needs.

artifact.py exports, saves, loads and checks whatever this module declares.
"""

from collections.abc import Callable
from functools import partial

import jax

from .reference import FEATURES, Params, conv_tagger, init_params

# One entry per argument, in order: its name, symbolic shape and dtype. The
# first is a float input (the one the tests differentiate). Dimension
# variables (b: the batch, s: the sequence length) are >= 1, b comes first in
# every input and output, and a name used twice means the same size.
INPUTS = (
    ("x", f"b, s, {FEATURES}", "float32"),
    ("mask", "b, s", "bool"),
)
# Any sequence length works: the convolution pads its ends explicitly.
CONSTRAINTS: tuple[str, ...] = ()


def exported_function(params: Params | None = None) -> Callable[..., jax.Array]:
    """conv_tagger with its weights bound: they are baked into the artifact as constants."""
    return partial(conv_tagger, init_params() if params is None else params)
