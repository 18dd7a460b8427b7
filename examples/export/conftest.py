"""Shared test setup: float64 for the NumPy oracle comparisons, and one trained, exported model
per test session (training takes about a second).

Every array the tests build has an explicit dtype; the model and the artifact are float32
throughout, so enabling float64 changes nothing they compute. It does mean the artifact is
exported under x64 and served (in the subprocess tests) without it, which must work too.
"""

import shutil

import jax
import pytest
from export_model import ARTIFACT_NAME, METADATA_NAME, train_and_export

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def shipped(tmp_path_factory):
    """Train and export once: {"params", "test_accuracy", "exported", "artifact", "metadata",
    "weights"} (the last three are paths). Tests must not modify these files; damage a copy."""
    return train_and_export(tmp_path_factory.mktemp("shipped"))


@pytest.fixture
def artifact_copy(shipped, tmp_path):
    """A private copy of the artifact and its metadata: (artifact path, metadata path)."""
    artifact, metadata = tmp_path / ARTIFACT_NAME, tmp_path / METADATA_NAME
    shutil.copy(shipped["artifact"], artifact)
    shutil.copy(shipped["metadata"], metadata)
    return artifact, metadata
