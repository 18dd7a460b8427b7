"""A training step for a deep stack of layers that keeps memory down: ``lax.scan`` over the
layers, ``jax.checkpoint`` with a saving policy on the scan body, and donated parameters.

The situation: a deep model whose backward pass runs out of memory. Reverse mode keeps every
residual of the forward pass (each layer's inputs, pre-activations and activations) until the
backward pass uses it; for L layers that is L copies of every intermediate. Three plain-JAX
tools, no custom code:

- ``lax.scan`` over layers whose parameters are stacked along a leading axis: one traced and
  compiled layer instead of L (compile time stays flat as the model deepens), and a single
  place to put the checkpoint.
- ``jax.checkpoint(layer, policy=...)`` on the scan body: the backward pass recomputes what
  the policy does not save. The policy is the decision:

  ======================  ========================================  =========================
  policy                  saved per layer                           recomputed in backward
  ======================  ========================================  =========================
  no checkpoint           everything (x, x @ w1, tanh(x @ w1))      nothing
  ``dots``                the matmul outputs it needs (x @ w1)      tanh
  ``names``               what you named with ``checkpoint_name``   everything else
  ``nothing``             only the scan carry (each layer's input)  x @ w1 and tanh
  ======================  ========================================  =========================

  ``dots`` (``jax.checkpoint_policies.dots_with_no_batch_dims_saveable``) is the usual start:
  matmuls are the costly part to recompute, elementwise ops are cheap. ``nothing`` keeps
  least and recomputes most (at worst one extra forward pass); ``names`` lets you pick the
  arrays to keep. Recomputation only pays where memory is the limit.
- ``donate_argnums`` on the step: the new parameters and momentum are written into the old
  ones' buffers, so a step needs no second copy of the model and optimiser state. The donated
  arrays are deleted; keep using the returned ones.

``main()`` checks, with ``jax.jit(...).lower(...).compile().memory_analysis()``, that each
policy lowers the compiled temporary memory against no checkpointing (and by about the bytes
it should), and with ``cost_analysis()`` what it recomputes instead; that losses and
gradients are the same with and without checkpointing and match an independent float64 NumPy
forward and backward pass; that donation deletes the inputs and reuses their buffers
(``alias_size_in_bytes`` and the buffer addresses); and that training lowers the loss.

To adapt: replace ``layer`` (params of one layer and the carry in, the carry out; the
carry's shape must not change), ``init_params``, ``loss_fn`` and the NumPy oracle
``loss_and_grads_numpy``; keep the ``checkpoint_name`` tags on what a ``names`` policy should
save. Run ``python remat_scan_train_step.py``; it exits non-zero on failure.
"""

import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

# --------------------------------------------------------------------------------------------
# The model (replace this): a residual tanh MLP, L layers with stacked parameters
# --------------------------------------------------------------------------------------------


def layer(x, w):
    """One residual block: x + tanh(x @ w1) @ w2. Carry x (batch, d) in, same shape out."""
    w1, w2 = w
    pre = checkpoint_name(x @ w1, "pre")  # the name a "names" policy can save
    return x + jnp.tanh(pre) @ w2


def init_params(key, layers, d, hidden):
    """Stacked parameters: w1 (layers, d, hidden), w2 (layers, hidden, d)."""
    k1, k2 = jax.random.split(key)
    w1 = jax.random.normal(k1, (layers, d, hidden)) / np.sqrt(d)
    w2 = jax.random.normal(k2, (layers, hidden, d)) / (np.sqrt(hidden) * layers)
    return w1, w2


POLICIES = {
    "none": None,  # no jax.checkpoint at all
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "names": jax.checkpoint_policies.save_only_these_names("pre"),
    "nothing": jax.checkpoint_policies.nothing_saveable,
}


def forward(params, x, policy="dots"):
    """Run the stack of layers over x (batch, d), with the given rematerialisation policy."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {policy!r}")

    def body(carry, w):
        return layer(carry, w), None  # nothing stacked per layer: the carry is all we keep

    if policy != "none":
        # prevent_cse=False: inside scan, JAX's CSE protection is not needed (scan already
        # keeps the recomputation from being merged with the forward), and it costs speed.
        body = jax.checkpoint(body, policy=POLICIES[policy], prevent_cse=False)
    out, _ = jax.lax.scan(body, x, params)
    return out


def loss_fn(params, x, y, policy="dots"):
    """Mean squared error of the stack's output against y."""
    return jnp.mean((forward(params, x, policy) - y) ** 2)


# --------------------------------------------------------------------------------------------
# The training step: SGD with momentum, parameters and momentum donated
# --------------------------------------------------------------------------------------------


def check_batch(params, x, y):
    """Clear errors for inputs that do not fit the parameters (runs once, at trace time)."""
    w1, w2 = params
    if w1.ndim != 3 or w2.ndim != 3 or w1.shape[0] != w2.shape[0]:
        raise ValueError(
            "params must be (w1 (layers, d, hidden), w2 (layers, hidden, d)), "
            f"got shapes {w1.shape} and {w2.shape}"
        )
    layers, d, hidden = w1.shape
    if w2.shape != (layers, hidden, d):
        raise ValueError(f"w2 must have shape {(layers, hidden, d)}, got {w2.shape}")
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"x must have shape (batch, {d}), got {x.shape}")
    if y.shape != x.shape:
        raise ValueError(f"y must have the shape of x, {x.shape}, got {y.shape}")


@partial(jax.jit, static_argnames=("policy", "lr", "beta"), donate_argnums=(0, 1))
def train_step(params, momentum, x, y, *, policy="dots", lr=0.1, beta=0.9):
    """One step: returns (new params, new momentum, loss). params and momentum are DONATED:
    after the call the arrays passed in are deleted and their buffers hold the results."""
    check_batch(params, x, y)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, policy)
    momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - lr * m, params, momentum)
    return params, momentum, loss


# --------------------------------------------------------------------------------------------
# Independent float64 oracle: the forward and backward pass written out in NumPy
# --------------------------------------------------------------------------------------------


def loss_and_grads_numpy(params, x, y):
    w1, w2 = (np.asarray(w, np.float64) for w in params)
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    xs, hs = [], []
    for l in range(len(w1)):  # noqa: E741
        h = np.tanh(x @ w1[l])
        xs.append(x)
        hs.append(h)
        x = x + h @ w2[l]
    loss = np.mean((x - y) ** 2)
    g = 2.0 * (x - y) / x.size  # d loss / d (output)
    dw1, dw2 = np.zeros_like(w1), np.zeros_like(w2)
    for l in reversed(range(len(w1))):  # noqa: E741
        dw2[l] = hs[l].T @ g
        dpre = (g @ w2[l].T) * (1.0 - hs[l] ** 2)
        dw1[l] = xs[l].T @ dpre
        g = g + dpre @ w1[l].T  # the residual path plus the block's path
    return loss, (dw1, dw2)


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

LAYERS, BATCH, D, HIDDEN = 8, 128, 128, 512
_failures = []


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  [{detail}]" if detail else ""))
    if not ok:
        _failures.append(name)


def close(name, got, want, rtol):
    """max |got - want| <= rtol * max |want|, over every leaf."""
    worst = 0.0
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        worst = max(worst, float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)))
    report(name, worst <= rtol, f"relative error {worst:.1e}, tolerance {rtol:.0e}")


def mib(n):
    return f"{n / 2**20:.2f} MiB"


def compile_policies(params, x, y):
    """The compiled value_and_grad of the loss for each policy (each compiled once)."""
    return {
        policy: jax.jit(jax.value_and_grad(partial(loss_fn, policy=policy)))
        .lower(params, x, y)
        .compile()
        for policy in POLICIES
    }


def check_values(compiled, params, x, y):
    print("-- losses and gradients: each policy vs no checkpoint vs float64 NumPy")
    reference = compiled["none"](params, x, y)
    loss64, grads64 = loss_and_grads_numpy(params, x, y)
    close("no checkpoint vs float64 NumPy: loss", reference[0], loss64, 1e-5)
    close("no checkpoint vs float64 NumPy: gradients", reference[1], grads64, 1e-4)
    for policy in ("dots", "names", "nothing"):
        # Recomputation repeats the same float32 operations, so the results agree far more
        # closely than float32 does with float64.
        got = compiled[policy](params, x, y)
        close(f"{policy}: loss and gradients vs no checkpoint", got, reference, 1e-6)


def check_memory_and_compute(compiled):
    print("-- what each policy costs: memory_analysis() and cost_analysis() of value_and_grad")
    temp, flops, tanh = {}, {}, {}
    for policy, executable in compiled.items():
        temp[policy] = executable.memory_analysis().temp_size_in_bytes
        cost = executable.cost_analysis()
        flops[policy], tanh[policy] = cost["flops"], cost["transcendentals"]
        print(
            f"       {policy:>8}: temporaries {mib(temp[policy])}, "
            f"{flops[policy] / 1e6:.1f} MFLOP and {tanh[policy] / 1e3:.0f}k tanh (one layer)"
        )
    # What each policy stops keeping, per layer but the last: tanh(x @ w1) for dots and names
    # (they keep x @ w1), and both (batch, hidden) arrays for nothing. Require half of it.
    per_layer = BATCH * HIDDEN * 4
    report(
        "dots keeps at least half a (batch, hidden) array per layer less",
        temp["none"] - temp["dots"] >= 0.5 * (LAYERS - 1) * per_layer,
    )
    report(
        "names keeps what dots keeps here (the only dot kept is 'pre')",
        temp["names"] == temp["dots"],
        f"{mib(temp['names'])} vs {mib(temp['dots'])}",
    )
    report(
        "nothing keeps at least one (batch, hidden) array per layer less than dots",
        temp["dots"] - temp["nothing"] >= (LAYERS - 1) * per_layer,
    )
    # The price: dots recomputes tanh (every tanh twice) but no matmul; nothing also
    # recomputes x @ w1 (2 * batch * d * hidden FLOPs). XLA's cost_analysis counts a loop's
    # body once, so these counts are those of one layer's forward and backward, not a step's.
    matmul = 2 * BATCH * D * HIDDEN
    report(
        "dots recomputes tanh, and no matmul",
        tanh["dots"] == 2 * tanh["none"] and flops["dots"] - flops["none"] < 0.5 * matmul,
    )
    report(
        "nothing recomputes x @ w1 in every layer",
        flops["nothing"] - flops["none"] >= matmul,
        f"+{(flops['nothing'] - flops['none']) / 1e6:.1f} MFLOP",
    )
    print(
        f"       nothing: {temp['nothing'] / temp['none']:.2f}x the temporaries of no "
        f"checkpoint, for {flops['nothing'] / flops['none']:.2f}x the FLOPs per layer"
    )


def check_donation(params, x, y):
    print("-- donation")
    momentum = jax.tree.map(jnp.zeros_like, params)
    state_bytes = 2 * sum(p.nbytes for p in params)
    # The compiled step, called directly below and in check_training: one compilation.
    # (Calling train_step(...) compiles the same program on first use.)
    step = train_step.lower(params, momentum, x, y).compile()
    aliased = step.memory_analysis().alias_size_in_bytes
    report(
        "params and momentum alias outputs",
        aliased == state_bytes,
        f"{mib(aliased)} aliased of {mib(state_bytes)}",
    )
    pointers = [a.unsafe_buffer_pointer() for a in jax.tree.leaves((params, momentum))]
    new_params, new_momentum, _ = step(params, momentum, x, y)
    report("donated inputs are deleted", all(a.is_deleted() for a in jax.tree.leaves(params)))
    reused = [a.unsafe_buffer_pointer() for a in jax.tree.leaves((new_params, new_momentum))]
    report("results live in the donated buffers", reused == pointers)
    try:
        jnp.sum(params[0])
    except RuntimeError as e:
        report("reading a donated array raises", "deleted" in str(e), str(e).splitlines()[0])
    else:
        report("reading a donated array raises", False, "nothing raised")
    return step


def check_training(step, key, x, y):
    print("-- training (20 steps of SGD with momentum, policy 'dots')")
    params = init_params(key, LAYERS, D, HIDDEN)
    momentum = jax.tree.map(jnp.zeros_like, params)
    losses = []
    for _ in range(20):
        params, momentum, loss = step(params, momentum, x, y)
        losses.append(float(loss))
    report(
        "loss falls by half", losses[-1] < 0.5 * losses[0], f"{losses[0]:.4f} -> {losses[-1]:.4f}"
    )


def check_bad_input(params, x, y):
    print("-- bad input")
    momentum = jax.tree.map(jnp.zeros_like, params)
    cases = {
        "x with the wrong width": ((params, momentum, x[:, :-1], y[:, :-1]), "x must have shape"),
        "y shaped unlike x": ((params, momentum, x, y[:-1]), "y must have the shape of x"),
        "w2 transposed": (((params[0], params[1].mT), momentum, x, y), "w2 must have shape"),
    }
    for name, (args, match) in cases.items():
        try:
            train_step(*args)
        except ValueError as e:
            report(name, match in str(e), str(e))
        else:
            report(name, False, "nothing raised")
    try:
        forward(params, x, policy="everything")
    except ValueError as e:
        report("unknown policy", "policy must be one of" in str(e), str(e))


def main():
    print(
        f"jax {jax.__version__} on {jax.default_backend()}; "
        f"{LAYERS} layers, batch {BATCH}, d {D}, hidden {HIDDEN}, float32"
    )
    key_params, key_x, key_train = jax.random.split(jax.random.key(0), 3)
    params = init_params(key_params, LAYERS, D, HIDDEN)
    x = jax.random.normal(key_x, (BATCH, D))
    y = jnp.sin(x)  # a target the stack can learn
    compiled = compile_policies(params, x, y)
    check_values(compiled, params, x, y)
    check_memory_and_compute(compiled)
    check_bad_input(params, x, y)
    step = check_donation(params, x, y)  # last use of params: they are donated
    check_training(step, key_train, x, y)
    print(f"\nFAILED checks: {_failures}" if _failures else "\nall checks passed")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())
