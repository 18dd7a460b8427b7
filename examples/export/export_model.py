"""Training side: train the classifier, export its inference function, write the artifact.

    python examples/export/export_model.py --out /tmp/spirals

writes, into the output folder:

- ``classifier.jax``: `Exported.serialize()` of ``x -> model.predict(trained_weights, x)``,
  the weights baked in as constants, batch dimension symbolic, lowered for cpu, cuda and tpu;
- ``classifier.json``: metadata that `serve.py` checks before it deserializes anything
  (sha256 and size of the artifact, JAX and jaxlib versions, serialization format version,
  platforms, signature, creation date);
- ``weights.npz``: the trained weights, for the comparisons in the tests and the benchmark
  (the serving side does not need them).
"""

import argparse
import datetime
import hashlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax import export
from model import (
    DTYPE,
    FEATURES,
    accuracy,
    init_params,
    make_spirals,
    predict,
    save_weights,
    train,
)
from serve import METADATA_FORMAT, METADATA_FORMAT_VERSION, serialization_version

PLATFORMS = ("cpu", "cuda", "tpu")
ARTIFACT_NAME = "classifier.jax"
METADATA_NAME = "classifier.json"
WEIGHTS_NAME = "weights.npz"
# Serving is inference only, so no VJP is serialized: the artifact is about half the size, and
# `jax.grad` of the deserialized function raises "No VJP is available" (a test pins it). Use
# vjp_order=1 if the receiving side has to differentiate (e.g. fine-tune through it).
VJP_ORDER = 0

TRAIN_SEED, TEST_SEED, INIT_SEED = 0, 1, 2
TRAIN_PER_CLASS, TEST_PER_CLASS = 500, 1000


def inference_fn(params):
    """``x -> predict(params, x)`` with the weights closed over, so that export bakes them into
    the module as constants: the artifact alone is the whole model."""
    weights = {name: jnp.asarray(value, DTYPE) for name, value in params.items()}

    def classify(x):
        return predict(weights, x)

    return classify


def export_classifier(params, *, platforms=PLATFORMS):
    """Export for inputs float32 (b, 2), b symbolic: one artifact serves every batch size."""
    spec = jax.ShapeDtypeStruct(export.symbolic_shape(f"b, {FEATURES}"), DTYPE)
    return export.export(jax.jit(inference_fn(params)), platforms=platforms)(spec)


def shape_to_json(shape):
    """A shape with symbolic dimensions as JSON: ``("b", 2)`` -> ``["b", 2]``."""
    return [str(d) if export.is_symbolic_dim(d) else int(d) for d in shape]


def avals_to_json(aval):
    return {"shape": shape_to_json(aval.shape), "dtype": np.dtype(aval.dtype).name}


def signature(avals, tree):
    """{name: {"shape": [...], "dtype": "..."}} for a flat list of avals and their pytree."""
    named = jax.tree_util.tree_flatten_with_path(tree.unflatten(range(len(avals))))[0]
    return {
        jax.tree_util.keystr(path, simple=True, separator="/"): avals_to_json(avals[i])
        for path, i in named
    }


def describe(exported, blob, *, vjp_order, created, extra=None):
    """The metadata that travels next to the serialized artifact `blob`."""
    return {
        "format": METADATA_FORMAT,
        "format_version": METADATA_FORMAT_VERSION,
        "function": exported.fun_name,
        "created": created.isoformat(timespec="seconds"),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        # What decides whether a newer JAX can still load the artifact (not its date).
        "serialization_version": serialization_version(blob),
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "vjp_order": vjp_order,
        "size_bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "inputs": [avals_to_json(aval) for aval in exported.in_avals],  # positional
        "outputs": signature(exported.out_avals, exported.out_tree),
        "training": extra or {},
    }


def write_artifact(exported, out_dir, *, vjp_order=VJP_ORDER, created=None, extra=None):
    """Serialize `exported` into out_dir: returns (artifact path, metadata path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    blob = bytes(exported.serialize(vjp_order=vjp_order))
    created = created or datetime.datetime.now(datetime.UTC)
    metadata = describe(exported, blob, vjp_order=vjp_order, created=created, extra=extra)
    artifact_path, metadata_path = out_dir / ARTIFACT_NAME, out_dir / METADATA_NAME
    artifact_path.write_bytes(blob)
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")
    return artifact_path, metadata_path


def train_classifier(*, steps=500, seed=INIT_SEED):
    """Train on the seeded spirals; returns (params, test accuracy, final training loss)."""
    x, y = make_spirals(TRAIN_PER_CLASS, seed=TRAIN_SEED)
    x_test, y_test = make_spirals(TEST_PER_CLASS, seed=TEST_SEED)
    params, losses = train(init_params(np.random.default_rng(seed)), x, y, steps=steps)
    return params, accuracy(params, x_test, y_test), float(losses[-1])


def train_and_export(out_dir, *, steps=500, seed=INIT_SEED, platforms=PLATFORMS):
    """The whole training side; returns a dict with the params, accuracy and paths."""
    params, test_accuracy, final_loss = train_classifier(steps=steps, seed=seed)
    exported = export_classifier(params, platforms=platforms)
    extra = {
        "dataset": "3 spirals, make_spirals(noise=0.2)",
        "steps": steps,
        "init_seed": seed,
        "final_loss": round(final_loss, 6),
        "test_accuracy": test_accuracy,
    }
    artifact_path, metadata_path = write_artifact(exported, out_dir, extra=extra)
    weights_path = Path(out_dir) / WEIGHTS_NAME
    save_weights(weights_path, params)
    return {
        "params": params,
        "test_accuracy": test_accuracy,
        "exported": exported,
        "artifact": artifact_path,
        "metadata": metadata_path,
        "weights": weights_path,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=INIT_SEED, help="weight-init seed")
    parser.add_argument("--platforms", default=",".join(PLATFORMS), help="comma-separated")
    args = parser.parse_args(argv)
    result = train_and_export(
        args.out, steps=args.steps, seed=args.seed, platforms=tuple(args.platforms.split(","))
    )
    print(f"test accuracy {result['test_accuracy']:.3f}")
    for key in ("artifact", "metadata", "weights"):
        print(f"wrote {result[key]} ({result[key].stat().st_size} bytes)")


if __name__ == "__main__":
    main()
