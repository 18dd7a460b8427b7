"""The golden artifact: exported when the project was generated (or by you,
with `python -m PACKAGE export --golden`), committed, and reloaded here by
today's JAX. It catches a JAX upgrade that can no longer load or run what you
shipped, and model code that drifted from what was exported.

Under a JAX older than the one that exported it (JAX 0.10 with a golden
artifact from JAX 0.12: JAX reads older artifacts, not newer ones), load
refuses it with artifact.ExportedByANewerJax, and the artifact's test is
skipped with that message; the model's outputs are still checked against the
recorded ones.

Optional: after changing the model on purpose, re-export it (the command
above); if you ship no golden artifact, delete this file and tests/golden/."""

import json
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from {{ cookiecutter.package_name }} import artifact

from compare import assert_close
from op_spec import SPEC

# Beside this file, however the package is installed (a wheel's tests too).
GOLDEN = Path(__file__).parent / "golden" / "model.jax"
REEXPORT = f"re-export it, in the project's root: python -m {artifact.__package__} export --golden"
# Generation writes it where the generating Python has JAX; without, it is
# missing until you run that command (the golden tests skip, saying so).
MISSING = f"no golden artifact at {GOLDEN} (generation writes it only where JAX is installed)"


class GoldenFormatSuperseded(UserWarning):
    pass


def warn_if_superseded(metadata, current):
    """Warn when this JAX writes a newer serialization format than the golden
    artifact's. JAX retires a format some six months after replacing it, and
    then refuses to load it (ValueError: "... older than the 6-month
    backward-compatibility window"): the file's date plays no part."""
    version = metadata.get("serialization_version")  # absent: exported before it was recorded
    if version is None or version < current:
        warnings.warn(
            f"the golden artifact uses serialization version {version} (exported by jax "
            f"{metadata['jax_version']}); jax {jax.__version__} writes version {current}, and a "
            f"later JAX will refuse the older one: {REEXPORT}",
            GoldenFormatSuperseded,
            stacklevel=2,
        )


def golden_io():
    """The golden inputs, in the artifact's order, and the output recorded with them."""
    if not GOLDEN.is_file():
        pytest.skip(f"{MISSING}; {REEXPORT}")
    metadata = json.loads(artifact.metadata_path(GOLDEN).read_text())
    with np.load(GOLDEN.with_suffix(".io.npz")) as data:
        return [data[spec["name"]] for spec in metadata["inputs"]], data["output"]


@pytest.fixture(scope="module")
def golden():
    if not GOLDEN.is_file():
        pytest.skip(f"{MISSING}; {REEXPORT}")
    try:
        return artifact.load(GOLDEN)
    except artifact.ExportedByANewerJax as refused:
        pytest.skip(f"refused as it should be: {refused}")


def test_golden_artifact_still_loads_and_runs(golden):
    warn_if_superseded(golden.metadata, artifact.current_serialization_version())
    inputs, expected = golden_io()
    got = golden(*inputs)
    assert_close(got, expected, SPEC.tolerance)


def test_the_model_still_computes_what_was_exported():
    # The model code must still compute what was exported; if you changed it
    # on purpose, re-export the golden artifact.
    inputs, expected = golden_io()
    changed = f"the model no longer computes what the golden artifact holds; {REEXPORT}"
    now = SPEC.reference(*inputs)
    assert now.shape == expected.shape, changed
    try:
        assert_close(now, expected, SPEC.tolerance)
    except AssertionError as err:
        raise AssertionError(f"{changed}\n{err}") from None


def test_superseded_formats_are_flagged(golden):
    recorded = golden.metadata["serialization_version"]
    assert recorded == artifact.serialization_version(GOLDEN.read_bytes())
    with pytest.warns(GoldenFormatSuperseded, match="re-export it"):
        warn_if_superseded(golden.metadata, current=recorded + 1)
    unrecorded = {k: v for k, v in golden.metadata.items() if k != "serialization_version"}
    with pytest.warns(GoldenFormatSuperseded, match="serialization version None"):
        warn_if_superseded(unrecorded, current=recorded)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_superseded(golden.metadata, current=recorded)
