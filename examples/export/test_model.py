"""The model on the training side: it really learns, and its JAX forward pass matches an
independent float64 NumPy one."""

import jax
import numpy as np
from export_model import TEST_PER_CLASS, TEST_SEED, TRAIN_PER_CLASS, TRAIN_SEED
from model import (
    CLASSES,
    FEATURES,
    accuracy,
    init_params,
    load_weights,
    make_spirals,
    predict,
    save_weights,
    train,
)
from reference import numpy_predict

# The spirals overlap near the centre, so no classifier is perfect: the floor sits below the
# held-out accuracy the trained MLP reaches over several data/init seeds (bench.py prints the
# shipped seeds' accuracy), with room for other platforms' rounding.
MIN_TEST_ACCURACY = 0.90
# A linear classifier trained the same way stays near chance (1/3).
MAX_LINEAR_ACCURACY = 0.50


def test_spirals_are_seeded_balanced_and_typed():
    x, y = make_spirals(100, seed=5)
    assert x.dtype == np.float32
    assert x.shape == (3 * 100, FEATURES)
    assert y.dtype == np.int32
    assert np.array_equal(np.bincount(y), [100] * CLASSES)
    x2, y2 = make_spirals(100, seed=5)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(x, make_spirals(100, seed=6)[0])


def test_trained_model_learned_the_spirals(shipped):
    assert shipped["test_accuracy"] > MIN_TEST_ACCURACY
    x, y = make_spirals(TEST_PER_CLASS, seed=TEST_SEED)
    assert accuracy(shipped["params"], x, y) == shipped["test_accuracy"]


def test_threshold_is_out_of_reach_without_learning_the_nonlinear_shape():
    """The accuracy threshold means something: an untrained MLP and a trained linear model,
    on the same data, both stay far below it."""
    x, y = make_spirals(TRAIN_PER_CLASS, seed=TRAIN_SEED)
    x_test, y_test = make_spirals(TEST_PER_CLASS, seed=TEST_SEED)
    untrained = init_params(np.random.default_rng(2))
    linear, _ = train(init_params(np.random.default_rng(2), sizes=(FEATURES, CLASSES)), x, y)
    assert accuracy(untrained, x_test, y_test) < MAX_LINEAR_ACCURACY
    assert accuracy(linear, x_test, y_test) < MAX_LINEAR_ACCURACY


def test_training_loss_goes_down():
    x, y = make_spirals(200, seed=7)
    _, losses = train(init_params(np.random.default_rng(8)), x, y, steps=200)
    assert losses.dtype == np.float32
    assert losses.shape == (200,)
    assert losses[-1] < 0.5 * losses[0]


# The forward pass's error against float64 NumPy, per platform where it has been measured.
# CPU: float32 rounding through three layers, ~1e-7 relative per op, probabilities <= 1. On a
# platform not listed (its transcendentals and matmul passes round differently) the comparison
# runs on the CPU device, which every JAX has: it checks the model's math, not the platform.
FORWARD_ATOL = {"cpu": 1e-5}


def oracle_device():
    """The default device if FORWARD_ATOL has its platform, else the CPU device."""
    default = jax.devices()[0]
    return default if default.platform in FORWARD_ATOL else jax.devices("cpu")[0]


def test_jax_forward_matches_float64_numpy(shipped):
    params = shipped["params"]
    x, _ = make_spirals(TEST_PER_CLASS, seed=TEST_SEED)
    device = oracle_device()
    got = jax.jit(predict)(jax.device_put(params, device), jax.device_put(x, device))
    assert got["probabilities"].devices() == {device}
    want = numpy_predict(params, x)
    assert got["probabilities"].dtype == np.float32
    assert got["labels"].dtype == np.int32
    atol = FORWARD_ATOL[device.platform]
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=atol)
    # Labels agree wherever the top two float64 probabilities are not within rounding.
    top2 = np.sort(want["probabilities"], axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(np.asarray(got["labels"])[clear], want["labels"][clear])


def test_weights_round_trip_through_npz(shipped, tmp_path):
    save_weights(tmp_path / "w.npz", shipped["params"])
    loaded = load_weights(tmp_path / "w.npz")
    assert sorted(loaded) == sorted(shipped["params"])
    for name, value in shipped["params"].items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], value)


def test_the_oracle_comparison_runs_on_the_cpu_where_no_tolerance_is_measured(monkeypatch):
    """A TPU host, simulated: its default device's platform has no measured tolerance, so the
    forward pass is compared on the CPU device."""

    class Tpu:
        platform = "tpu"

    real_devices = jax.devices
    monkeypatch.setattr(jax, "devices", lambda *b: real_devices(*b) if b else [Tpu()])
    assert oracle_device() == real_devices("cpu")[0]
