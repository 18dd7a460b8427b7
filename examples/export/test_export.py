"""The exported artifact: what was lowered, what the metadata says, and what a deserialized
call can and cannot do (platforms, vmap, grad)."""

import datetime
import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import serve
from export_model import PLATFORMS, export_classifier, write_artifact
from jax import export
from model import make_spirals, predict


def deserialize(path):
    return export.deserialize(bytearray(path.read_bytes()))


def test_every_requested_platform_was_lowered(shipped):
    assert PLATFORMS == ("cpu", "cuda", "tpu")
    for exported in (shipped["exported"], deserialize(shipped["artifact"])):
        assert exported.platforms == PLATFORMS
        # Several platforms: the module takes a platform index and branches on it.
        assert "_platform_index" in exported.mlir_module()


def test_batch_dimension_is_symbolic(shipped):
    exported = deserialize(shipped["artifact"])
    (x_aval,) = exported.in_avals
    assert export.is_symbolic_dim(x_aval.shape[0])
    assert str(x_aval.shape[0]) == "b"
    assert x_aval.shape[1] == 2
    assert x_aval.dtype == np.float32
    assert exported.out_tree == jax.tree.structure({"labels": 0, "probabilities": 0})


def test_metadata_describes_the_artifact(shipped):
    metadata = json.loads(shipped["metadata"].read_text())
    blob = shipped["artifact"].read_bytes()
    assert metadata["sha256"] == hashlib.sha256(blob).hexdigest()
    assert metadata["size_bytes"] == len(blob)
    assert metadata["jax_version"] == jax.__version__
    assert metadata["platforms"] == list(PLATFORMS)
    assert metadata["vjp_order"] == 0
    version = metadata["calling_convention_version"]
    assert version == shipped["exported"].calling_convention_version
    assert (
        export.minimum_supported_calling_convention_version
        <= version
        <= export.maximum_supported_calling_convention_version
    )
    assert metadata["inputs"] == [{"shape": ["b", 2], "dtype": "float32"}]
    assert metadata["outputs"] == {
        "labels": {"shape": ["b"], "dtype": "int32"},
        "probabilities": {"shape": ["b", 3], "dtype": "float32"},
    }
    created = datetime.datetime.fromisoformat(metadata["created"])
    assert created.tzinfo is not None
    assert abs(datetime.datetime.now(datetime.UTC) - created) < datetime.timedelta(hours=1)
    assert metadata["training"]["test_accuracy"] == shipped["test_accuracy"]


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_cpu_call_of_deserialized_artifact_matches_jax(shipped, batch):
    """In this process; the fresh-process version is in test_serve.py."""
    exported = deserialize(shipped["artifact"])
    x = np.random.default_rng(batch).uniform(-4, 4, (batch, 2)).astype(np.float32)
    got = jax.jit(exported.call)(x)
    want = jax.jit(predict)(shipped["params"], x)
    assert got["probabilities"].shape == (batch, 3)
    assert got["labels"].shape == (batch,)
    np.testing.assert_array_equal(got["labels"], want["labels"])
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-6, atol=1e-7)


def test_cuda_only_artifact_is_refused_on_cpu(shipped, tmp_path):
    cuda_only = export_classifier(shipped["params"], platforms=("cuda",))
    assert cuda_only.platforms == ("cuda",)
    artifact, _ = write_artifact(cuda_only, tmp_path)
    with pytest.raises(ValueError, match=r"exported for platforms cuda, but this process runs on"):
        serve.load(artifact)
    # Without serve.py's check, JAX itself refuses, but only at the first call.
    x = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"was exported for platforms '\('cuda',\)' but it is"):
        deserialize(artifact).call(x)


def test_vmap_of_a_deserialized_call_is_not_implemented(shipped):
    """Pin: call_exported has no batching rule. The symbolic batch dimension is the way to
    batch: reshape (n, m, 2) to (n * m, 2), call once, reshape back."""
    exported = deserialize(shipped["artifact"])
    x = np.random.default_rng(0).standard_normal((4, 5, 2)).astype(np.float32)
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported' not"):
        jax.vmap(exported.call)(x)
    flat = exported.call(x.reshape(20, 2))["labels"].reshape(4, 5)
    want = jax.vmap(lambda rows: predict(shipped["params"], rows))(x)["labels"]
    np.testing.assert_array_equal(flat, want)


def test_grad_needs_a_serialized_vjp(shipped, tmp_path):
    """The shipped artifact has vjp_order=0: inference only, so grad raises. vjp_order=1 makes
    the deserialized function differentiable, at about twice the size."""
    x, _ = make_spirals(5, seed=3)

    def top_probability_sum(fn):
        return lambda x_: jnp.sum(jnp.max(fn(x_)["probabilities"], axis=1))

    exported = deserialize(shipped["artifact"])
    with pytest.raises(ValueError, match="No VJP is available"):
        jax.grad(top_probability_sum(exported.call))(x)

    with_vjp = tmp_path / "with_vjp.jax"
    with_vjp.write_bytes(shipped["exported"].serialize(vjp_order=1))
    assert with_vjp.stat().st_size > 1.5 * shipped["artifact"].stat().st_size
    got = jax.grad(top_probability_sum(deserialize(with_vjp).call))(x)
    want = jax.grad(top_probability_sum(lambda x_: predict(shipped["params"], x_)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_host_callbacks_cannot_be_exported(shipped):
    """Pin: anything that calls back into Python (jax.debug.print, pure_callback, io_callback)
    is refused at export time; an artifact is self-contained StableHLO."""

    def noisy(x):
        jax.debug.print("batch of {n}", n=x.shape[0])
        return predict(shipped["params"], x)

    spec = jax.ShapeDtypeStruct((4, 2), np.float32)
    with pytest.raises(NotImplementedError, match="serialization of host_callbacks is not yet"):
        # For this process's platform: lowering a host callback for another platform fails
        # earlier, with another error ("the platform for the specified backend tpu is
        # different from the lowering platform cpu" on a TPU host).
        export.export(jax.jit(noisy), platforms=(export.default_export_platform(),))(spec)
