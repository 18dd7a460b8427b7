"""Serving side: load an exported classifier and answer prediction requests.

This file imports only the standard library, NumPy, JAX and flatbuffers (which
`jax.export`'s serialization needs anyway). It never sees the model's source:
everything it needs (the computation, the weights, the input signature, the output names)
comes from the artifact and the metadata file written next to it by `export_model.py`.

    python serve.py ARTIFACT INPUTS.npz OUTPUTS.npz [--metadata META.json] [--key x]

reads the float32 (batch, 2) array `x` from INPUTS.npz and writes `probabilities` and
`labels` to OUTPUTS.npz. From Python: ``load(artifact_path).predict(x)``.

Before deserializing, `load` checks the metadata, the artifact's size and sha256, the calling
convention and the platform; an artifact in a serialization format this JAX has retired is a
ValueError that says to re-export it. `predict` checks dtype, rank, shape and finiteness. Each
problem is a FileNotFoundError, ValueError or TypeError that names it; the CLI prints it and
exits 2.
The sha256 catches damaged or mismatched files, not an attacker who rewrites both files: only
deserialize artifacts from a source you trust.
"""

import argparse
import functools
import hashlib
import json
import re
import sys
import warnings
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flatbuffers import encode, number_types, packer, table
from jax import export

METADATA_FORMAT = "jax-ladder/exported-classifier"
METADATA_FORMAT_VERSION = 2  # 2: adds serialization_version; the date no longer matters
# The configuration option (and, upper-cased, the environment variable) that lets JAX load an
# artifact whose serialization format it has retired.
EXPIRED_VERSIONS_FLAG = "jax_export_deserialize_expired_versions"
REQUIRED_METADATA = {
    "format": str,
    "format_version": int,
    "jax_version": str,
    "jaxlib_version": str,
    "serialization_version": int,
    "platforms": list,
    "calling_convention_version": int,
    "size_bytes": int,
    "sha256": str,
    "inputs": list,
    "outputs": dict,
}


class CompatibilityWarning(UserWarning):
    """The artifact may stop loading, or loads outside JAX's compatibility guarantees."""


class OlderFormatWarning(CompatibilityWarning):
    """The artifact's serialization format is older than the one this JAX writes: a later JAX
    may refuse it, so re-export it."""


# --- metadata ---------------------------------------------------------------------------------


def read_metadata(path):
    """Read and check the metadata JSON; raises FileNotFoundError or ValueError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"metadata file {path} not found: an artifact is served only together with the "
            "metadata written next to it at export time (it holds the artifact's sha256)"
        )
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"metadata file {path} is not valid JSON: {e}") from e
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata file {path} must hold a JSON object")
    missing = sorted(set(REQUIRED_METADATA) - set(metadata))
    if missing:
        raise ValueError(f"metadata file {path} is missing {', '.join(missing)}")
    for key, kind in REQUIRED_METADATA.items():
        value = metadata[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(
                f"metadata file {path}: {key!r} must be of type {kind.__name__}, "
                f"got {type(value).__name__}"
            )
    if not all(isinstance(p, str) for p in metadata["platforms"]):
        raise ValueError(f"metadata file {path}: 'platforms' must be a list of names")
    if (metadata["format"], metadata["format_version"]) != (
        METADATA_FORMAT,
        METADATA_FORMAT_VERSION,
    ):
        raise ValueError(
            f"metadata file {path} has format {metadata['format']!r} version "
            f"{metadata['format_version']}; this server reads {METADATA_FORMAT!r} version "
            f"{METADATA_FORMAT_VERSION}"
        )
    return metadata


def version_tuple(version):
    """'0.12.0.1' -> (0, 12, 0, 1); stops at the first non-numeric part ('0.5.0.dev1' -> 0,5,0)."""
    parts = []
    for part in version.split("."):
        match = re.fullmatch(r"\d+", part)
        if match is None:
            break
        parts.append(int(part))
    return tuple(parts)


def check_versions(metadata):
    """The calling convention must be one this JAX can run; a newer exporting JAX warns."""
    version = metadata["calling_convention_version"]
    low = export.minimum_supported_calling_convention_version
    high = export.maximum_supported_calling_convention_version
    if not low <= version <= high:
        action = "upgrade JAX on the serving side" if version > high else "re-export it"
        raise ValueError(
            f"artifact uses calling convention version {version}, but JAX {jax.__version__} "
            f"runs versions {low} to {high}: {action}"
        )
    if version_tuple(metadata["jax_version"]) > version_tuple(jax.__version__):
        warnings.warn(
            f"artifact was exported with JAX {metadata['jax_version']}, newer than this JAX "
            f"({jax.__version__}); the six-month guarantee runs the other way (older "
            "artifacts on newer JAX). Export with the oldest JAX you serve with.",
            CompatibilityWarning,
            stacklevel=2,
        )


def verify_artifact(blob, metadata, path):
    """Size, then sha256: a damaged file never reaches the deserializer."""
    if len(blob) != metadata["size_bytes"]:
        raise ValueError(
            f"artifact {path} is {len(blob)} bytes but its metadata says "
            f"{metadata['size_bytes']}: the file is truncated or is not the one the metadata "
            "describes"
        )
    digest = hashlib.sha256(blob).hexdigest()
    if digest != metadata["sha256"]:
        raise ValueError(
            f"artifact {path} fails its sha256 check (metadata {metadata['sha256'][:12]}..., "
            f"file {digest[:12]}...): the file is corrupted or is not the one the metadata "
            "describes; copy it again or re-export"
        )


# --- serialization format ---------------------------------------------------------------------


def serialization_version(blob):
    """The serialization format version JAX wrote into a serialized artifact.

    This, not the file's date, decides whether a newer JAX can still load it: JAX refuses a
    format some time (at least six months) after replacing it. (JAX before July 2026,
    serialization version 12, wrote 3 here whatever the format.)
    """
    # jax.export has no public accessor for it. It is field 0 of the file's root table, a
    # uint16; JAX's flatbuffer schema only ever appends fields, so this read does not depend on
    # JAX's private generated reader.
    buffer = bytearray(blob)
    root = table.Table(buffer, encode.Get(packer.uoffset, buffer, 0))
    field = root.Offset(4)  # vtable slot of field 0
    return root.Get(number_types.Uint16Flags, root.Pos + field) if field else 0


@functools.cache
def current_serialization_version():
    """The serialization format version this JAX writes (exports a one-op function, once)."""
    tiny = export.export(jax.jit(jnp.negative))(jax.ShapeDtypeStruct((), jnp.float32))
    return serialization_version(tiny.serialize())


def check_format_age(version, metadata, path):
    """Warn (OlderFormatWarning) when a newer format exists: the artifact's clock is running."""
    current = current_serialization_version()
    if version < current:
        warnings.warn(
            f"artifact {path} is in serialization format {version} (exported with JAX "
            f"{metadata['jax_version']}); JAX {jax.__version__} writes format {current}. It "
            "still loads, but JAX stops reading a format some time (at least six months) after "
            "replacing it: re-export it with the JAX you serve with.",
            OlderFormatWarning,
            stacklevel=3,
        )


def deserialize(blob, metadata, path):
    """`export.deserialize`, with its failures turned into ValueErrors that say what to do."""
    try:
        return export.deserialize(bytearray(blob))
    except Exception as e:  # flatbuffers raises struct.error, TypeError, UnicodeDecodeError...
        if isinstance(e, ValueError) and "compatibility window" in str(e):
            # JAX's refusal of a serialization format it has retired.
            raise ValueError(expired_message(blob, metadata, path)) from e
        raise ValueError(
            f"artifact {path} passed its sha256 check but could not be deserialized "
            f"({type(e).__name__}: {e}); it was not written by Exported.serialize, or by a "
            f"JAX incompatible with {jax.__version__}"
        ) from e


def expired_message(blob, metadata, path):
    return (
        f"artifact {path} (serialization format {serialization_version(blob)}, exported with "
        f"JAX {metadata['jax_version']}, jaxlib {metadata['jaxlib_version']}) is in a format "
        f"JAX {jax.__version__} no longer reads: JAX refuses a serialization format some time "
        "(at least six months) after replacing it, however recent the file. Re-export it from "
        "the training code with the JAX you serve with (export_model.py --out DIR). Until you "
        f"can, setting {EXPIRED_VERSIONS_FLAG} (jax.config.update, or the environment variable "
        f"{EXPIRED_VERSIONS_FLAG.upper()}=1) may still load it, with no guarantee that it runs "
        "or computes the same."
    )


# --- loading ----------------------------------------------------------------------------------


def shape_to_json(shape):
    return [str(d) if export.is_symbolic_dim(d) else int(d) for d in shape]


def aval_to_json(aval):
    return {"shape": shape_to_json(aval.shape), "dtype": np.dtype(aval.dtype).name}


def output_signature(exported):
    leaves = exported.out_tree.unflatten(range(len(exported.out_avals)))
    return {
        jax.tree_util.keystr(path, simple=True, separator="/"): aval_to_json(exported.out_avals[i])
        for path, i in jax.tree_util.tree_flatten_with_path(leaves)[0]
    }


def check_matches_metadata(exported, blob, metadata, path):
    """The metadata is what users read; it must describe the artifact it sits next to."""
    found = {
        "serialization_version": serialization_version(blob),
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "inputs": [aval_to_json(aval) for aval in exported.in_avals],
        "outputs": output_signature(exported),
    }
    for key, value in found.items():
        if metadata[key] != value:
            raise ValueError(
                f"metadata for {path} does not match the artifact: {key} is {metadata[key]!r} "
                f"in the metadata but {value!r} in the artifact"
            )


def load(artifact_path, metadata_path=None):
    """Check and deserialize an artifact; returns a `Classifier`.

    The metadata defaults to the artifact's path with a .json suffix.
    """
    artifact_path = Path(artifact_path)
    metadata_path = Path(metadata_path) if metadata_path else artifact_path.with_suffix(".json")
    if not artifact_path.is_file():
        raise FileNotFoundError(f"artifact {artifact_path} not found")
    metadata = read_metadata(metadata_path)
    blob = artifact_path.read_bytes()
    verify_artifact(blob, metadata, artifact_path)
    check_versions(metadata)

    platform = export.default_export_platform()
    if platform not in metadata["platforms"]:
        raise ValueError(
            f"artifact {artifact_path} was exported for platforms "
            f"{', '.join(metadata['platforms'])}, but this process runs on {platform}: "
            f"re-export it with {platform!r} among the platforms"
        )
    exported = deserialize(blob, metadata, artifact_path)
    check_matches_metadata(exported, blob, metadata, artifact_path)
    check_format_age(metadata["serialization_version"], metadata, artifact_path)
    if len(exported.in_avals) != 1:
        raise ValueError(
            f"serve.py serves one-input functions; {artifact_path} takes "
            f"{len(exported.in_avals)} inputs"
        )
    return Classifier(exported, metadata, platform)


class Classifier:
    """A deserialized classifier: `predict(x)` validates `x`, then runs the artifact.

    The call is `jax.jit(exported.call)`: compiled once per batch size, then cached.
    """

    def __init__(self, exported, metadata, platform):
        self.exported = exported
        self.metadata = metadata
        self.platform = platform
        (self.input_aval,) = exported.in_avals
        self.input_dtype = np.dtype(self.input_aval.dtype)
        self.input_shape = tuple(shape_to_json(self.input_aval.shape))  # e.g. ("b", 2)
        self._call = jax.jit(exported.call)

    def check_input(self, x):
        """Return `x` if the artifact can take it; raise TypeError/ValueError naming why not."""
        if not isinstance(x, np.ndarray | jax.Array):
            raise TypeError(f"inputs must be a NumPy or JAX array, got {type(x).__name__}")
        if x.dtype != self.input_dtype:
            raise TypeError(
                f"inputs must have dtype {self.input_dtype.name}, got {x.dtype}; convert them "
                f"with x.astype(np.{self.input_dtype.name}) if that is what you mean"
            )
        expected = "(" + ", ".join(map(str, self.input_shape)) + ")"
        if x.ndim != len(self.input_shape):
            raise ValueError(
                f"inputs must have rank {len(self.input_shape)}, shape {expected}; got rank "
                f"{x.ndim}, shape {tuple(x.shape)}"
            )
        for axis, (want, got) in enumerate(zip(self.input_shape, x.shape, strict=True)):
            if isinstance(want, str):  # the symbolic batch dimension: any size from 1
                if got < 1:
                    raise ValueError(
                        f"empty batch: inputs have shape {tuple(x.shape)}; dimension {want!r} "
                        f"(axis {axis}) must be at least 1"
                    )
            elif got != want:
                raise ValueError(
                    f"inputs must have shape {expected}: axis {axis} must be {want}, got "
                    f"shape {tuple(x.shape)}"
                )
        if np.issubdtype(self.input_dtype, np.inexact):
            finite_rows = np.all(np.isfinite(np.asarray(x).reshape(x.shape[0], -1)), axis=1)
            if not finite_rows.all():
                bad = np.flatnonzero(~finite_rows)[:10].tolist()
                raise ValueError(f"inputs contain NaN or infinity, in rows {bad} (first 10)")
        return x

    def predict(self, x):
        """{output name: NumPy array}, e.g. probabilities (b, 3) float32, labels (b,) int32."""
        outputs = self._call(self.check_input(x))
        return jax.tree.map(np.asarray, outputs)


# --- command line -----------------------------------------------------------------------------


def read_inputs(path, key):
    """The array `key` from the .npz file `path`, with errors that name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"inputs file {path} not found")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"inputs file {path} is not a readable .npz file ({e})") from e
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"inputs file {path} holds a bare array, expected an .npz")
    with data:
        if key not in data.files:
            found = ", ".join(data.files) or "nothing"
            raise ValueError(f"inputs file {path} has no array {key!r} (it has: {found})")
        try:
            return data[key]
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
            raise ValueError(f"inputs file {path}: array {key!r} is unreadable ({e})") from e


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", type=Path, help="the serialized artifact (.jax)")
    parser.add_argument("inputs", type=Path, help=".npz holding the input array")
    parser.add_argument("outputs", type=Path, help=".npz to write the outputs to")
    parser.add_argument("--metadata", type=Path, help="default: the artifact path with .json")
    parser.add_argument("--key", default="x", help="name of the input array (default: x)")
    args = parser.parse_args(argv)
    try:
        classifier = load(args.artifact, args.metadata)
        outputs = classifier.predict(read_inputs(args.inputs, args.key))
    except (FileNotFoundError, ValueError, TypeError) as e:
        print(f"serve.py: error: {e}", file=sys.stderr)
        return 2
    np.savez(args.outputs, **outputs)
    shapes = ", ".join(
        f"{name} {value.dtype}{list(value.shape)}" for name, value in outputs.items()
    )
    print(f"wrote {shapes} to {args.outputs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
