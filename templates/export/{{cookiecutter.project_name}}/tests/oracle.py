"""Independent float64 NumPy model."""

import numpy as np

from compare import Ulps

# How far the model may be from this oracle, in ulps (tests/compare.py). Its
# outputs and gradients are sums over hidden features and positions whose
# terms cancel (matmuls, tanh, softmax pooling), so the rounding is on the
# scale of the largest entry, not of each: measured at most 7.2 ulps of the
# largest output and 4.1 of the largest gradient (float32); twice that.
VALUES = Ulps(at_value=0, at_scale=16)
GRADIENTS = Ulps(at_value=0, at_scale=8)


{%- set seq = cookiecutter.symbolic_dims == "batch,seq" %}


def predict_f64(params, {% if seq %}x, mask{% else %}x{% endif %}):
    """The model in float64 NumPy, written independently of reference.py."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    x = np.asarray(x, np.float64)
{%- if seq %}
    seq = x.shape[1]
    h = np.tanh(x @ p["w_in"] + p["b_in"] + p["position"][:seq])
    scores = h @ p["query"]
    pooled = np.zeros((x.shape[0], h.shape[2]))
    for row in range(x.shape[0]):
        keep = np.asarray(mask[row], bool)
        if keep.any():
            s = scores[row, keep]
            weights = np.exp(s - s.max())
            pooled[row] = (weights / weights.sum()) @ h[row, keep]
{%- else %}
    pooled = np.tanh(x @ p["w_in"] + p["b_in"])
{%- endif %}
    return pooled @ p["w_out"] + p["b_out"]
