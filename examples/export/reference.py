"""Oracle for the model: the same forward pass in float64 NumPy, sharing no code with JAX."""

import numpy as np


def numpy_predict(params, x):
    """float64 forward pass of `model.predict`: {"probabilities": (n, 3), "labels": (n,)}.

    The weights are float32 values widened exactly to float64, so the only difference from the
    float32 JAX computation is JAX's float32 rounding.
    """
    weights = {name: np.asarray(value, np.float64) for name, value in params.items()}
    last = sum(1 for name in weights if name.startswith("w")) - 1
    h = np.asarray(x, np.float64)
    for i in range(last):
        h = np.tanh(h @ weights[f"w{i}"] + weights[f"b{i}"])
    z = h @ weights[f"w{last}"] + weights[f"b{last}"]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return {"probabilities": e / e.sum(axis=1, keepdims=True), "labels": z.argmax(axis=1)}
