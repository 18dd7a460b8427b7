"""The model being shipped: a small MLP classifier for three interleaved spirals.

Everything here is plain JAX and NumPy and lives only on the training side. `serve.py` must
never import this module; the tests check that it is not even importable where serve.py runs.

Parameters are a flat dict of float32 arrays ``{"w0": (2, H), "b0": (H,), "w1": ..., ...}`` so
that they save to and load from a ``.npz`` file without any pytree machinery.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

FEATURES = 2
CLASSES = 3
HIDDEN = (64, 64)
DTYPE = np.float32


# --- data -------------------------------------------------------------------------------------


def make_spirals(n_per_class, *, seed, noise=0.2, turns=1.25):
    """Three interleaved spiral arms in the plane, one per class: (x float32 (n, 2), y int32 (n,)).

    Arm k is r(t) * (cos, sin)(t * 2 pi * turns + 2 pi k / 3) for t in [0, 1] with r = 4 t,
    plus isotropic Gaussian noise of standard deviation `noise`. With the default noise the arms
    overlap near the centre, so no classifier reaches 100 %, and they are far from linearly
    separable: a trained linear classifier scores about 37 %, barely above chance (33 %).
    """
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k in range(CLASSES):
        t = rng.uniform(0.0, 1.0, n_per_class)
        angle = t * 2.0 * np.pi * turns + 2.0 * np.pi * k / CLASSES
        radius = 4.0 * t
        points = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
        xs.append(points + noise * rng.standard_normal((n_per_class, FEATURES)))
        ys.append(np.full(n_per_class, k))
    order = rng.permutation(CLASSES * n_per_class)
    x = np.concatenate(xs).astype(DTYPE)[order]
    y = np.concatenate(ys).astype(np.int32)[order]
    return x, y


# --- the network ------------------------------------------------------------------------------


def init_params(rng, sizes=(FEATURES, *HIDDEN, CLASSES)):
    """Glorot-uniform weights and zero biases, float32, from a NumPy Generator."""
    params = {}
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params[f"w{i}"] = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(DTYPE)
        params[f"b{i}"] = np.zeros(fan_out, DTYPE)
    return {name: jnp.asarray(value, DTYPE) for name, value in params.items()}


def num_layers(params):
    return sum(1 for name in params if name.startswith("w"))


def logits(params, x):
    """(batch, 2) -> (batch, 3): tanh hidden layers, linear output.

    The matmuls ask for float32 (HIGHEST): at the default precision a TPU does float32 matmuls in
    one bfloat16 pass (and a GPU in TF32), and the artifact then serves other numbers there than
    on the CPU."""
    h = x
    last = num_layers(params) - 1
    for i in range(last):
        h = jnp.tanh(dense(h, params[f"w{i}"]) + params[f"b{i}"])
    return dense(h, params[f"w{last}"]) + params[f"b{last}"]


def dense(h, w):
    return jnp.matmul(h, w, precision=jax.lax.Precision.HIGHEST)


def predict(params, x):
    """The inference function that gets exported: class probabilities and the argmax label.

    Returns a dict, so the names travel inside the artifact (the exported `out_tree`).
    """
    z = logits(params, x)
    return {
        "probabilities": jax.nn.softmax(z, axis=-1),
        "labels": jnp.argmax(z, axis=-1).astype(jnp.int32),
    }


def loss(params, x, y):
    """Mean softmax cross-entropy."""
    log_p = jax.nn.log_softmax(logits(params, x), axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_p, y[:, None], axis=1))


def accuracy(params, x, y):
    return float(np.mean(np.asarray(predict(params, x)["labels"]) == np.asarray(y)))


# --- training ---------------------------------------------------------------------------------


def train(params, x, y, *, steps=500, learning_rate=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    """Full-batch Adam, written out by hand; the whole loop is one `lax.scan` under `jit`.

    Returns (trained params, per-step loss as a float32 NumPy array).
    """
    x = jnp.asarray(x, DTYPE)
    y = jnp.asarray(y, jnp.int32)
    lr, b1, b2, eps = (jnp.asarray(v, DTYPE) for v in (learning_rate, b1, b2, eps))

    def step(state, t):
        p, m, v = state
        value, g = jax.value_and_grad(loss)(p, x, y)
        m = jax.tree.map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree.map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        t = t.astype(DTYPE)
        scale = lr * jnp.sqrt(1 - b2**t) / (1 - b1**t)
        p = jax.tree.map(lambda p_, m_, v_: p_ - scale * m_ / (jnp.sqrt(v_) + eps), p, m, v)
        return (p, m, v), value

    @jax.jit
    def run(p):
        zeros = jax.tree.map(jnp.zeros_like, p)
        (p, _, _), losses = jax.lax.scan(
            step, (p, zeros, zeros), jnp.arange(1, steps + 1, dtype=jnp.int32)
        )
        return p, losses

    trained, losses = run(params)
    return trained, np.asarray(losses)


# --- weights on disk --------------------------------------------------------------------------


def save_weights(path, params):
    np.savez(path, **{name: np.asarray(value) for name, value in params.items()})


def load_weights(path):
    with np.load(path) as data:
        return {name: jnp.asarray(data[name], DTYPE) for name in data.files}
