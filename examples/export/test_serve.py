"""serve.py: the same predictions in a fresh process that cannot see the model code, and a
clear error, never a crash, for every bad input or damaged file."""

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jaxlib
import numpy as np
import pytest
import serve
from export_model import ARTIFACT_NAME, write_artifact
from jax import export
from jax._src.export import serialization as jax_serialization
from jax._src.export import serialization_generated as flatbuffer
from model import predict

HERE = Path(__file__).resolve().parent
BATCHES = (1, 7, 1000)
TRAINING_MODULES = ("model", "export_model", "reference", "conftest")
# Features of the JAX running the tests, detected (the examples run on JAX 0.10.2 .. 0.12.x).
# JAX >= July 2026 (format 12) writes the format version it uses into an artifact; before, the
# field always said 3.
RECORDS_ITS_FORMAT = (
    serve.current_serialization_version() == jax_serialization._SERIALIZATION_VERSION
)
# Newer JAX refuses formats it has retired, with an escape hatch (0.12 does; 0.10.2 reads every
# format and has no such setting).
RETIRES_FORMATS = hasattr(jax.config, serve.EXPIRED_VERSIONS_FLAG)
needs_retirement = pytest.mark.skipif(
    not RETIRES_FORMATS,
    reason=f"JAX {jax.__version__} retires no serialization format "
    f"(no {serve.EXPIRED_VERSIONS_FLAG})",
)


def edit_metadata(path, **changes):
    """Rewrite metadata fields in place; a value of None deletes the field."""
    metadata = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            metadata.pop(key)
        else:
            metadata[key] = value
    path.write_text(json.dumps(metadata))


def request(batch, seed=0):
    return np.random.default_rng(seed + batch).uniform(-4, 4, (batch, 2)).astype(np.float32)


# --- a fresh process that has serve.py, the artifact, and nothing else ------------------------


def serving_dir(shipped, tmp_path):
    """A folder holding only copies of serve.py, the artifact and its metadata."""
    folder = tmp_path / "serving"
    folder.mkdir()
    for path in (HERE / "serve.py", shipped["artifact"], shipped["metadata"]):
        shutil.copy(path, folder / path.name)
    return folder


def run_python(folder, *args, env_extra=None):
    """sys.executable in `folder`, with PYTHONPATH = that folder, then this process's
    PYTHONPATH less the example folder (JAX may come from it, as on machines that provide JAX
    that way), and no other PYTHON* variables: the example folder, which holds the model code,
    is not on its path. JAX_PLATFORMS=cpu: where this process holds an accelerator (a TPU chip
    admits one process at a time) the child could not open it; compare its results with
    `on_cpu`'s. `env_extra`: more environment variables."""
    inherited = [
        entry
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if entry and Path(entry).resolve() != HERE
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env = env | {"JAX_PLATFORMS": "cpu"} | (env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *inherited])
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )


def on_cpu(fn):
    """fn, called with the CPU as the default device: what a `run_python` child computes."""

    def call(*args):
        with jax.default_device(jax.devices("cpu")[0]):
            return fn(*args)

    return call


DRIVER = textwrap.dedent(
    """
    import importlib.util, sys
    import jax
    import numpy as np
    import serve

    training = sys.argv[1].split(",")
    assert [m for m in training if importlib.util.find_spec(m) is not None] == [], "importable"
    classifier = serve.load("{artifact}")
    with np.load("requests.npz") as requests:
        outputs = {{}}
        for key in requests.files:
            for name, value in classifier.predict(requests[key]).items():
                outputs[f"{{key}}/{{name}}"] = value
    np.savez("responses.npz", **outputs)
    assert [m for m in training if m in sys.modules] == [], "imported"
    print("jax_enable_x64", jax.config.jax_enable_x64)
    """
)


def test_fresh_process_without_model_code_serves_the_same_predictions(shipped, tmp_path):
    # The check inside the subprocess can fail: here, under pytest, the model is importable.
    assert importlib.util.find_spec("model") is not None
    folder = serving_dir(shipped, tmp_path)
    np.savez(folder / "requests.npz", **{f"b{b}": request(b) for b in BATCHES})
    (folder / "driver.py").write_text(DRIVER.format(artifact=ARTIFACT_NAME))

    result = run_python(folder, "driver.py", ",".join(TRAINING_MODULES))
    assert result.returncode == 0, result.stderr
    assert "jax_enable_x64 False" in result.stdout  # exported under x64, served without it

    with np.load(folder / "responses.npz") as responses:
        for b in BATCHES:
            want = on_cpu(jax.jit(predict))(shipped["params"], request(b))
            labels, probabilities = responses[f"b{b}/labels"], responses[f"b{b}/probabilities"]
            assert labels.dtype == np.int32
            assert labels.shape == (b,)
            assert probabilities.dtype == np.float32
            assert probabilities.shape == (b, 3)
            np.testing.assert_array_equal(labels, want["labels"])
            np.testing.assert_allclose(probabilities, want["probabilities"], rtol=1e-6, atol=1e-7)


def test_cli_in_a_fresh_process(shipped, tmp_path):
    folder = serving_dir(shipped, tmp_path)
    x = request(7)
    np.savez(folder / "in.npz", x=x)
    ok = run_python(folder, "serve.py", ARTIFACT_NAME, "in.npz", "out.npz")
    assert ok.returncode == 0, ok.stderr
    assert "wrote labels int32[7], probabilities float32[7, 3] to out.npz" in ok.stdout
    with np.load(folder / "out.npz") as out:
        np.testing.assert_array_equal(
            out["labels"], on_cpu(jax.jit(predict))(shipped["params"], x)["labels"]
        )

    np.savez(folder / "bad.npz", x=x.astype(np.float64))
    bad = run_python(folder, "serve.py", ARTIFACT_NAME, "bad.npz", "out2.npz")
    assert bad.returncode == 2
    # The error is stderr's last line; before it, an accelerator's runtime may
    # warn (a TPU VM without transparent hugepages does), which is not the tool's.
    assert bad.stderr.splitlines()[-1] == (
        "serve.py: error: inputs must have dtype float32, got float64; convert them with "
        "x.astype(np.float32) if that is what you mean"
    )
    assert "Traceback" not in bad.stderr
    assert not (folder / "out2.npz").exists()


# --- bad requests -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def classifier(shipped):
    return serve.load(shipped["artifact"])


@pytest.mark.parametrize(
    ("x", "error", "message"),
    [
        ([[0.0, 1.0]], TypeError, "inputs must be a NumPy or JAX array, got list"),
        (np.zeros((3, 2), np.float64), TypeError, "inputs must have dtype float32, got float64"),
        (np.zeros((3, 2), np.int32), TypeError, "inputs must have dtype float32, got int32"),
        (np.zeros(2, np.float32), ValueError, r"must have rank 2, shape \(b, 2\); got rank 1"),
        (np.zeros((1, 3, 2), np.float32), ValueError, "must have rank 2, shape .* got rank 3"),
        (np.zeros((4, 3), np.float32), ValueError, r"axis 1 must be 2, got shape \(4, 3\)"),
        (np.zeros((0, 2), np.float32), ValueError, r"empty batch: .* dimension 'b' \(axis 0\)"),
        (
            np.array([[0, 0], [0, np.nan], [np.inf, 1]], np.float32),
            ValueError,
            r"inputs contain NaN or infinity, in rows \[1, 2\]",
        ),
    ],
    ids=["list", "float64", "int32", "rank1", "rank3", "features", "empty", "nonfinite"],
)
def test_bad_requests_raise_a_clear_error(classifier, x, error, message):
    with pytest.raises(error, match=message):
        classifier.predict(x)


def test_jax_arrays_are_accepted(classifier, shipped):
    x = request(5)
    got = classifier.predict(jax.numpy.asarray(x))
    np.testing.assert_array_equal(got["labels"], classifier.predict(x)["labels"])
    assert isinstance(got["labels"], np.ndarray)


def test_read_inputs_names_the_problem(tmp_path):
    np.savez(tmp_path / "ok.npz", x=request(3), other=request(2))
    np.testing.assert_array_equal(serve.read_inputs(tmp_path / "ok.npz", "x"), request(3))
    with pytest.raises(FileNotFoundError, match=r"inputs file .*missing\.npz not found"):
        serve.read_inputs(tmp_path / "missing.npz", "x")
    with pytest.raises(ValueError, match=r"has no array 'y' \(it has: x, other\)"):
        serve.read_inputs(tmp_path / "ok.npz", "y")
    np.save(tmp_path / "bare.npy", request(3))
    with pytest.raises(ValueError, match=r"holds a bare array, expected an \.npz"):
        serve.read_inputs(tmp_path / "bare.npy", "x")
    blob = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match=r"cut\.npz is not a readable \.npz file"):
        serve.read_inputs(tmp_path / "cut.npz", "x")


# --- damaged or missing files -----------------------------------------------------------------


def test_missing_metadata(artifact_copy):
    artifact, metadata = artifact_copy
    metadata.unlink()
    with pytest.raises(FileNotFoundError, match=r"metadata file .*classifier\.json not found"):
        serve.load(artifact)


def test_missing_artifact(artifact_copy):
    artifact, _ = artifact_copy
    artifact.unlink()
    with pytest.raises(FileNotFoundError, match=r"artifact .*classifier\.jax not found"):
        serve.load(artifact)


def test_truncated_artifact(artifact_copy):
    artifact, _ = artifact_copy
    blob = artifact.read_bytes()
    artifact.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match=rf"is {len(blob) // 2} bytes but its metadata says"):
        serve.load(artifact)


def test_corrupted_artifact_fails_the_sha256_check(artifact_copy):
    artifact, _ = artifact_copy
    blob = bytearray(artifact.read_bytes())
    blob[len(blob) // 3] ^= 0x01  # one bit, same size
    artifact.write_bytes(blob)
    with pytest.raises(ValueError, match="fails its sha256 check"):
        serve.load(artifact)


def test_jax_alone_does_not_notice_a_flipped_bit_in_the_weights(artifact_copy, shipped):
    """Why the sha256 check: the weights sit in the artifact as raw float32 bytes, and
    `export.deserialize` happily loads a copy with one sign bit flipped, which then serves
    different answers. serve.load refuses it."""
    artifact, _ = artifact_copy
    blob = bytearray(artifact.read_bytes())
    w_last = np.asarray(shipped["params"]["w2"]).tobytes()
    offset = blob.find(w_last)
    assert offset > 0
    assert blob.count(w_last) == 1
    blob[offset + 3] ^= 0x80  # sign bit of w2[0, 0] (little-endian float32)
    artifact.write_bytes(blob)

    x = request(1000)
    damaged = export.deserialize(bytearray(blob)).call(x)
    original = jax.jit(predict)(shipped["params"], x)
    assert np.max(np.abs(damaged["probabilities"] - original["probabilities"])) > 1e-3
    with pytest.raises(ValueError, match="fails its sha256 check"):
        serve.load(artifact)


def test_garbage_with_a_matching_hash_is_a_value_error_not_a_struct_error(artifact_copy):
    """A file that passes the hash (metadata regenerated for it) but is not an artifact: the
    deserializer's struct.error is turned into a ValueError that names the file."""
    artifact, metadata = artifact_copy
    garbage = np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8).tobytes()
    artifact.write_bytes(garbage)
    edit_metadata(metadata, size_bytes=len(garbage), sha256=hashlib.sha256(garbage).hexdigest())
    with pytest.raises(ValueError, match="passed its sha256 check but could not be") as info:
        serve.load(artifact)
    assert isinstance(info.value.__cause__, struct.error)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_unreadable_metadata(artifact_copy, text, message):
    artifact, metadata = artifact_copy
    metadata.write_text(text)
    with pytest.raises(ValueError, match=message):
        serve.load(artifact)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sha256": None}, "is missing sha256"),
        ({"sha256": None, "platforms": None}, "is missing platforms, sha256"),
        ({"size_bytes": "22852"}, "'size_bytes' must be of type int, got str"),
        ({"size_bytes": True}, "'size_bytes' must be of type int, got bool"),
        ({"platforms": ["cpu", 3]}, "'platforms' must be a list of names"),
        ({"format": "onnx"}, "has format 'onnx' version 2; this server reads"),
        ({"format_version": 1}, "version 1; this server reads .* version 2"),
        ({"serialization_version": "12"}, "'serialization_version' must be of type int"),
        ({"serialization_version": 11}, "serialization_version is 11 in the metadata but"),
        ({"calling_convention_version": 99}, "calling convention version 99, but JAX .* upgrade"),
        ({"calling_convention_version": 1}, "calling convention version 1, .* re-export it"),
        ({"platforms": ["cpu", "tpu"]}, "platforms is \\['cpu', 'tpu'\\] in the metadata but"),
        ({"inputs": [{"shape": ["b", 3], "dtype": "float32"}]}, "does not match the artifact"),
    ],
    ids=[
        "no-hash",
        "two-missing",
        "size-str",
        "size-bool",
        "platform-int",
        "format",
        "format-v1",
        "serialization-str",
        "serialization-wrong",
        "cc-new",
        "cc-old",
        "platforms",
        "inputs",
    ],
)
def test_bad_metadata(artifact_copy, changes, message):
    artifact, metadata = artifact_copy
    edit_metadata(metadata, **changes)
    with pytest.raises(ValueError, match=message):
        serve.load(artifact)


def test_metadata_can_live_elsewhere(artifact_copy, tmp_path):
    artifact, metadata = artifact_copy
    moved = shutil.move(metadata, tmp_path / "elsewhere.json")
    assert serve.load(artifact, moved).predict(request(3))["labels"].shape == (3,)


# --- serialization format: what decides whether a newer JAX still loads an artifact ----------


def written_format(blob):
    """The serialization version, read by JAX's own generated reader (not serve.py's)."""
    return flatbuffer.Exported.GetRootAsExported(bytearray(blob)).SerializationVersion()


def test_metadata_records_versions_and_serialization_format(shipped):
    metadata = json.loads(shipped["metadata"].read_text())
    blob = shipped["artifact"].read_bytes()
    assert metadata["jax_version"] == jax.__version__
    assert metadata["jaxlib_version"] == jaxlib.__version__
    # JAX >= July 2026 (format 12) records the format it writes (before, always 3).
    assert (jax_serialization._SERIALIZATION_VERSION >= 12) is RECORDS_ITS_FORMAT
    written = jax_serialization._SERIALIZATION_VERSION if RECORDS_ITS_FORMAT else 3
    assert metadata["serialization_version"] == written
    assert serve.serialization_version(blob) == written_format(blob) == written
    assert serve.current_serialization_version() == written


def test_current_artifact_loads_without_warnings(shipped):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        serve.load(shipped["artifact"])


def write_in_format(shipped, folder, monkeypatch, version, *, retired=False):
    """The shipped model serialized as an older JAX would have, by JAX's own flatbuffer builder:
    `version` in the version field and, if `retired`, the device count in the old 16-bit field
    and no JAX version, as JAX wrote before November 2025 (format 4 or older). JAX 0.12
    refuses that layout, however recent the file."""
    add_version = flatbuffer.ExportedAddSerializationVersion
    with monkeypatch.context() as old_jax:
        old_jax.setattr(
            flatbuffer, "ExportedAddSerializationVersion", lambda b, _: add_version(b, version)
        )
        if retired:
            old_jax.setattr(
                flatbuffer, "ExportedAddNrDevices", flatbuffer.ExportedAddNrDevicesShort
            )
            if hasattr(flatbuffer, "ExportedAddJaxVersion"):  # JAX >= July 2026
                old_jax.setattr(flatbuffer, "ExportedAddJaxVersion", lambda b, _: None)
        artifact, metadata = write_artifact(shipped["exported"], folder)
    assert written_format(artifact.read_bytes()) == version
    return artifact, metadata


@pytest.fixture
def expired(shipped, tmp_path, monkeypatch):
    """A genuinely expired artifact (format 3, written today) and its metadata."""
    return write_in_format(shipped, tmp_path / "expired", monkeypatch, 3, retired=True)


@needs_retirement
def test_expired_format_is_refused_with_what_to_do(expired):
    artifact, metadata = expired
    assert json.loads(metadata.read_text())["serialization_version"] == 3
    with pytest.raises(ValueError, match="serialization format 3") as refused:
        serve.load(artifact)
    message = str(refused.value)
    assert f"is in a format JAX {jax.__version__} no longer reads" in message
    assert "Re-export it from the training code" in message
    assert "JAX_EXPORT_DESERIALIZE_EXPIRED_VERSIONS=1" in message
    # What JAX itself raised, kept as the cause.
    assert isinstance(refused.value.__cause__, ValueError)
    assert "6-month backward-compatibility window" in str(refused.value.__cause__)


@needs_retirement
def test_expired_format_loads_with_the_escape_hatch(expired, shipped):
    artifact, _ = expired
    previous = getattr(jax.config, serve.EXPIRED_VERSIONS_FLAG)
    jax.config.update(serve.EXPIRED_VERSIONS_FLAG, True)
    try:
        with (
            pytest.warns(DeprecationWarning, match="6-month backward-compatibility window"),
            pytest.warns(serve.OlderFormatWarning, match="in serialization format 3"),
        ):
            classifier = serve.load(artifact)
    finally:
        jax.config.update(serve.EXPIRED_VERSIONS_FLAG, previous)
    x = request(9)
    want = jax.jit(predict)(shipped["params"], x)
    np.testing.assert_array_equal(classifier.predict(x)["labels"], want["labels"])


@needs_retirement
def test_cli_on_an_expired_artifact_and_the_environment_variable(expired, tmp_path):
    folder = tmp_path / "serving"
    folder.mkdir()
    for path in (HERE / "serve.py", *expired):
        shutil.copy(path, folder / path.name)
    np.savez(folder / "in.npz", x=request(3))
    refused = run_python(folder, "serve.py", ARTIFACT_NAME, "in.npz", "out.npz")
    assert refused.returncode == 2, refused.stderr
    assert "no longer reads" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (folder / "out.npz").exists()
    hatch = {serve.EXPIRED_VERSIONS_FLAG.upper(): "1"}
    loaded = run_python(folder, "serve.py", ARTIFACT_NAME, "in.npz", "out.npz", env_extra=hatch)
    assert loaded.returncode == 0, loaded.stderr
    assert "OlderFormatWarning" in loaded.stderr


@pytest.mark.skipif(
    not RECORDS_ITS_FORMAT,
    reason=f"JAX {jax.__version__} writes format 3 into every artifact: none is older",
)
def test_older_format_warns_but_serves(shipped, tmp_path, monkeypatch):
    older = jax_serialization._SERIALIZATION_VERSION - 1
    artifact, _ = write_in_format(shipped, tmp_path / "older", monkeypatch, older)
    with pytest.warns(serve.OlderFormatWarning, match=f"format {older} .* writes format"):
        classifier = serve.load(artifact)
    x = request(4)
    np.testing.assert_array_equal(
        classifier.predict(x)["labels"], jax.jit(predict)(shipped["params"], x)["labels"]
    )


def test_artifact_from_a_newer_jax_warns(artifact_copy):
    artifact, metadata = artifact_copy
    edit_metadata(metadata, jax_version="99.0.0")
    with pytest.warns(serve.CompatibilityWarning, match=r"exported with JAX 99\.0\.0, newer"):
        serve.load(artifact)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.12.0.1", (0, 12, 0, 1)), ("0.5.0.dev20240101", (0, 5, 0)), ("1.0", (1, 0))],
)
def test_version_tuple(text, expected):
    assert serve.version_tuple(text) == expected


def test_loaded_classifier_describes_itself(classifier):
    # The platform this process runs on, among those exported: "tpu" on a TPU host.
    assert classifier.platform == export.default_export_platform()
    assert classifier.platform in classifier.exported.platforms
    assert classifier.input_shape == ("b", 2)
    assert classifier.input_dtype == np.float32
    assert set(classifier.metadata) >= set(serve.REQUIRED_METADATA)
