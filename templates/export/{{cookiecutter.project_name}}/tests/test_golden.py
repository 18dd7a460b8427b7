"""The golden artifact: exported when the project was generated (or by you,
with `python -m PACKAGE export --golden`), committed, and reloaded here by
today's JAX. It catches a JAX upgrade that can no longer load or run what you
shipped, and model code that drifted from what was exported."""

import datetime
import warnings

import numpy as np
import pytest

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.__main__ import GOLDEN
from {{ cookiecutter.package_name }}.reference import init_params, predict

from oracle import assert_close, rtol_for

REEXPORT = f"re-export it: python -m {artifact.__package__} export --golden"


class GoldenArtifactTooOld(UserWarning):
    pass


def warn_if_too_old(loaded, today=None):
    age = loaded.age_days(today)
    if age > artifact.COMPATIBILITY_DAYS:
        warnings.warn(
            f"the golden artifact is {age:.0f} days old (exported by jax "
            f"{loaded.metadata['jax_version']}); JAX only guarantees loading artifacts up to "
            f"{artifact.COMPATIBILITY_DAYS} days old: {REEXPORT}",
            GoldenArtifactTooOld,
            stacklevel=2,
        )


@pytest.fixture(scope="module")
def golden():
    if not GOLDEN.is_file():
        pytest.skip(f"no golden artifact at {GOLDEN}; {REEXPORT}")
    return artifact.load(GOLDEN)


def test_golden_artifact_still_loads_and_runs(golden):
    warn_if_too_old(golden)
    with np.load(GOLDEN.with_suffix(".io.npz")) as data:
        inputs = [data[spec["name"]] for spec in golden.metadata["inputs"]]
        expected = data["output"]
    got = golden(*inputs)
    assert_close(got, expected, rtol_for("float32"))
    # The model code must still compute what was exported; if you changed it
    # on purpose, re-export the golden artifact.
    assert_close(predict(init_params(), *inputs), expected, rtol_for("float32"))


def test_old_artifacts_are_flagged(golden):
    later = datetime.datetime.fromisoformat(golden.metadata["created"]) + datetime.timedelta(
        days=artifact.COMPATIBILITY_DAYS + 1
    )
    with pytest.warns(GoldenArtifactTooOld, match="re-export it"):
        warn_if_too_old(golden, today=later)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_too_old(golden, today=later - datetime.timedelta(days=2))
