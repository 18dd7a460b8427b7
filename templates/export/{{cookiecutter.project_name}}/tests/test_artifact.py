{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""The serialized artifact against the plain-JAX model: round trips at many
sizes, platforms, differentiation, bad inputs and damaged files."""

import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
{%- if seq %}
from jax import export
{%- endif %}

from {{ cookiecutter.package_name }} import artifact
from {{ cookiecutter.package_name }}.reference import {% if seq %}MAX_LEN, {% endif %}init_params, predict

from oracle import assert_close, rtol_for

# Concrete sizes for every symbolic dimension, edges included.
SIZES = [{% if seq %}(1, 1), (2, 3), (5, 17), (64, 1), (3, {{ "MAX_LEN" }}){% else %}(1,), (2,), (17,), (1000,){% endif %}]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One exported artifact on disk, shared by the tests of this module."""
    path = tmp_path_factory.mktemp("artifact") / "model.jax"
    return artifact.save(artifact.export_model(), path)


@pytest.fixture(scope="module")
def loaded(saved):
    return artifact.load(saved)


def inputs_for(loaded, sizes, seed=0):
    {% if seq %}batch, seq = sizes
    return artifact.random_inputs(loaded.metadata, batch=batch, seq=seq, seed=seed){% else %}(batch,) = sizes
    return artifact.random_inputs(loaded.metadata, batch=batch, seed=seed){% endif %}


@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_round_trip_matches_reference(loaded, sizes):
    inputs = inputs_for(loaded, sizes)
    got = loaded(*inputs.values())
    want = predict(init_params(), *inputs.values())
    assert got.shape == want.shape
    assert_close(got, want, rtol_for("float32"))


def test_metadata_describes_the_artifact(saved, loaded):
    meta = loaded.metadata
    assert meta["jax_version"] == jax.__version__
    assert tuple(meta["platforms"]) == artifact.PLATFORMS == loaded.exported.platforms
    assert meta["calling_convention_version"] == loaded.exported.calling_convention_version
    assert meta["vjp_order"] == artifact.VJP_ORDER
    symbolic = [", ".join(map(str, aval.shape)) for aval in loaded.exported.in_avals]
    assert [i["shape"] for i in meta["inputs"]] == symbolic
    assert meta["outputs"][0]["shape"] == "b, 4"
    assert meta["size_bytes"] == saved.stat().st_size
    assert loaded.age_days() < 1


def test_every_requested_platform_is_lowered(loaded):
    assert loaded.exported.platforms == artifact.PLATFORMS
    # A multi-platform module takes the index of the platform it runs on as
    # an extra argument and dispatches on it.
    multi = 'jax.global_constant = "_platform_index"' in loaded.exported.mlir_module()
    assert multi == (len(artifact.PLATFORMS) > 1)
    for platform in artifact.PLATFORMS:  # each lowers on its own, no device needed
        assert artifact.export_model(platforms=(platform,)).platforms == (platform,)


def test_artifact_without_the_current_platform_is_refused(tmp_path):
    path = artifact.save(artifact.export_model(platforms=("cuda",)), tmp_path / "gpu.jax")
    loaded = artifact.load(path)
    with pytest.raises(ValueError, match="exported for cuda, not for cpu"):
        loaded(*inputs_for(loaded, SIZES[1]).values())
    # JAX's own check, if our wrapper is bypassed, is as clear:
    with pytest.raises(ValueError, match="exported for platforms"):
        loaded.exported.call(*inputs_for(loaded, SIZES[1]).values())


def test_jit_of_the_loaded_call(loaded):
    inputs = inputs_for(loaded, SIZES[2])
    got = jax.jit(loaded.exported.call)(*inputs.values())
    assert_close(got, predict(init_params(), *inputs.values()), rtol_for("float32"))


def test_vmap_is_not_supported_by_exported_calls(loaded):
    # jax.export has no batching rule: batch inside the symbolic batch
    # dimension instead, or export the vmapped function.
    inputs = inputs_for(loaded, SIZES[1])
    stacked = [np.stack([a, a]) for a in inputs.values()]
    with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported'"):
        jax.vmap(loaded.exported.call)(*stacked)
{% if cookiecutter.vjp_order != "0" %}

@pytest.mark.parametrize("sizes", SIZES[:3], ids=str)
def test_grad_through_the_artifact_matches_reference(loaded, sizes):
    inputs = inputs_for(loaded, sizes)
    x, rest = inputs["x"], list(inputs.values())[1:]
    params = init_params()
    got = jax.grad(lambda x: jnp.sum(loaded(x, *rest) ** 2))(x)
    want = jax.grad(lambda x: jnp.sum(predict(params, x, *rest) ** 2))(x)
    assert_close(got, want, 10 * rtol_for("float32"))
{% endif %}

def test_artifact_without_vjp_cannot_be_differentiated(tmp_path):
    path = artifact.save(artifact.export_model(), tmp_path / "novjp.jax", vjp_order=0)
    loaded = artifact.load(path)
    inputs = inputs_for(loaded, SIZES[1])
    x, rest = inputs["x"], list(inputs.values())[1:]
    with pytest.raises(ValueError, match="No VJP is available"):
        jax.grad(lambda x: jnp.sum(loaded(x, *rest)))(x)


# --- bad inputs and damaged files ------------------------------------------------


def test_wrong_dtype(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    inputs["x"] = inputs["x"].astype(np.float64)
    with pytest.raises(TypeError, match="x must be float32, got float64"):
        loaded(*inputs.values())


def test_wrong_rank(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    inputs["x"] = inputs["x"][0]
    with pytest.raises(ValueError, match="x must have rank"):
        loaded(*inputs.values())


def test_static_dimension_mismatch(loaded):
    inputs = inputs_for(loaded, SIZES[1])
    inputs["x"] = inputs["x"][..., :-1]
    with pytest.raises(ValueError, match=r"x.shape\[-?\d\] must be 16, got 15"):
        loaded(*inputs.values())


def test_wrong_number_of_inputs(loaded):
    with pytest.raises(TypeError, match="takes {{ '2' if seq else '1' }} inputs"):
        loaded()
{% if seq %}

def test_shared_dimension_must_agree(loaded):
    inputs = inputs_for(loaded, (3, 5))
    inputs["mask"] = inputs["mask"][:2]
    with pytest.raises(ValueError, match="dimension b is 3 in one input and 2 in mask"):
        loaded(*inputs.values())


def test_constraint_violation(loaded):
    inputs = inputs_for(loaded, (2, MAX_LEN + 1))
    with pytest.raises(ValueError, match=f"constraint 's <= {MAX_LEN}'"):
        loaded(*inputs.values())


def test_without_the_constraint_export_fails():
    # What the constraint is for: slicing the positional table to s is only
    # valid when s <= MAX_LEN, and the exporter cannot know that by itself.
    b, s = export.symbolic_shape("b, s")
    specs = [jax.ShapeDtypeStruct((b, s, 16), jnp.float32), jax.ShapeDtypeStruct((b, s), jnp.bool_)]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        export.export(jax.jit(lambda x, m: predict(init_params(), x, m)))(*specs)
{% endif %}

def test_zero_sized_dimension_is_rejected(loaded):
    inputs = inputs_for(loaded, SIZES[0])
    inputs = {k: v[:0] for k, v in inputs.items()}
    with pytest.raises(ValueError, match=r"must be >= 1, got 0"):
        loaded(*inputs.values())


def test_truncated_file(saved, tmp_path):
    damaged = tmp_path / "model.jax"
    damaged.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    artifact.metadata_path(damaged).write_text(artifact.metadata_path(saved).read_text())
    with pytest.raises(ValueError, match="corrupted or truncated"):
        artifact.load(damaged)


def test_corrupted_file(saved, tmp_path):
    blob = bytearray(saved.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    damaged = tmp_path / "model.jax"
    damaged.write_bytes(bytes(blob))
    artifact.metadata_path(damaged).write_text(artifact.metadata_path(saved).read_text())
    with pytest.raises(ValueError, match="corrupted or truncated"):
        artifact.load(damaged)


def test_garbage_file_with_matching_metadata(tmp_path):
    # Even with metadata that vouches for it, bytes that are not an artifact
    # give a ValueError, not a crash.
    path = artifact.save(artifact.export_model(), tmp_path / "model.jax")
    path.write_bytes(b"not an artifact at all")
    meta = artifact.metadata_path(path)
    data = json.loads(meta.read_text())
    data["sha256"] = hashlib.sha256(b"not an artifact at all").hexdigest()
    meta.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="could not be deserialized"):
        artifact.load(path)


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no artifact at"):
        artifact.load(tmp_path / "nothing.jax")
    (tmp_path / "lonely.jax").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="lonely.jax.json is missing"):
        artifact.load(tmp_path / "lonely.jax")
