"""Independent float64 NumPy model, and the comparison every test uses.

assert_close records the worst error it has seen; conftest.py prints it at the
end of the run, so you can see how close the tests came to their tolerances.
"""

import os

import numpy as np

# Relative tolerance per dtype, a few units of its machine epsilon (float32:
# 8 eps), applied to each element as
# |got - want| <= rtol * (|want| + max|want|): relative to the element and to
# the array's scale, which suits sums of many terms.
RTOL = {"float64": 1e-12, "float32": 1e-6}

WORST = {"error": 0.0, "fraction": 0.0, "test": ""}


def rtol_for(dtype) -> float:
    return RTOL[np.dtype(dtype).name]


def assert_close(got, want, rtol):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    assert np.all(np.isfinite(got) == np.isfinite(want)), "NaN/inf where the oracle has none"
    if want.size == 0:
        return
    finite = np.isfinite(want)
    error = np.abs(got - want)[finite]
    tolerance = rtol * (np.abs(want[finite]) + np.max(np.abs(want[finite]), initial=0.0))
    tolerance = np.maximum(tolerance, np.finfo(np.float64).tiny)
    fraction = float(np.max(error / tolerance, initial=0.0))
    if fraction > WORST["fraction"] or not WORST["test"]:
        WORST.update(
            error=float(np.max(error, initial=0.0)),
            fraction=fraction,
            test=os.environ.get("PYTEST_CURRENT_TEST", "? ").rsplit(" ", 1)[0],
        )
    worst = int(np.argmax(error / tolerance)) if error.size else 0
    assert fraction <= 1.0, (
        f"max error {np.max(error):.3e} exceeds tolerance (rtol={rtol:g}): "
        f"got {got[finite].ravel()[worst]!r}, want {want[finite].ravel()[worst]!r}"
    )


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
