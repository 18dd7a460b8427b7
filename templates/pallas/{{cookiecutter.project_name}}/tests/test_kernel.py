"""The Pallas kernel against the plain-JAX reference, in interpret mode on any
machine; lowered for the real target on this host; run natively where the
target exists. Target-specific details live in tests/target.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from {{ cookiecutter.package_name }} import BACKWARD, fused_matmul, fused_matmul_reference, kernel

import target
from oracle import assert_close, rtol_for

needs_target = pytest.mark.skipif(not target.present(), reason=f"needs a {target.NAME} device")
# Ragged shapes: edges that do not divide the default 128 blocks, on every axis.
SHAPES = [(1, 1, 1), (8, 128, 128), (256, 256, 256), (200, 300, 130), (129, 257, 383)]
DTYPES = [jnp.float32, jnp.bfloat16]


def operands(rng, shape, dtype):
    m, k, n = shape
    a = jnp.asarray(rng.standard_normal((m, k)) / k**0.5, dtype)  # keeps z = O(1)
    b = jnp.asarray(rng.standard_normal((k, n)), dtype)
    bias = jnp.asarray(rng.standard_normal(n), dtype)
    return a, b, bias


def loss(f, **kwargs):
    def scalar(a, b, bias, cotangent):
        return jnp.sum(cotangent * f(a, b, bias, **kwargs).astype(jnp.float32))

    return scalar


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_match_reference(rng, shape, dtype):
    args = operands(rng, shape, dtype)
    assert_close(
        fused_matmul(*args, interpret=True), fused_matmul_reference(*args), rtol_for(dtype)
    )


@pytest.mark.parametrize("blocks", [(256, 128, 128), (128, 256, 128), (128, 128, 256)], ids=str)
def test_other_block_sizes(rng, blocks):
    block_m, block_n, block_k = blocks
    args = operands(rng, (200, 300, 390), jnp.float32)
    got = fused_matmul(*args, block_m=block_m, block_n=block_n, block_k=block_k, interpret=True)
    assert_close(got, fused_matmul_reference(*args), rtol_for(jnp.float32))


@pytest.mark.parametrize("shape", [(200, 300, 130), (8, 128, 128)], ids=str)
def test_strict_interpreter_finds_no_race_or_unwritten_memory(rng, shape):
    args = operands(rng, shape, jnp.float32)
    cotangent = jnp.asarray(rng.standard_normal((shape[0], shape[2])), jnp.float32)
    got = fused_matmul(*args, interpret=target.STRICT)
    assert_close(got, fused_matmul_reference(*args), rtol_for(jnp.float32))
    grads = jax.grad(loss(fused_matmul, interpret=target.STRICT), argnums=(0, 1, 2))(
        *args, cotangent
    )
    want = jax.grad(loss(fused_matmul_reference), argnums=(0, 1, 2))(*args, cotangent)
    for g, w in zip(grads, want, strict=True):
        assert_close(g, w, 10 * rtol_for(jnp.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES[1:4], ids=str)
def test_gradients_match_reference(rng, shape, dtype):
    args = operands(rng, shape, dtype)
    cotangent = jnp.asarray(rng.standard_normal((shape[0], shape[2])), jnp.float32)
    grads = jax.jit(jax.grad(loss(fused_matmul, interpret=True), argnums=(0, 1, 2)))(
        *args, cotangent
    )
    want = jax.grad(loss(fused_matmul_reference), argnums=(0, 1, 2))(*args, cotangent)
    for g, w in zip(grads, want, strict=True):
        assert g.dtype == w.dtype
        assert_close(g, w, 10 * rtol_for(dtype))


def test_check_grads_reverse_mode(rng):
    args = operands(rng, (16, 128, 128), jnp.float32)
    f = lambda a, b, bias: fused_matmul(a, b, bias, interpret=True)  # noqa: E731
    check_grads(f, args, order=1, modes=["rev"], atol=2e-2, rtol=2e-2, eps=1e-2)


def test_jit_and_vmap(rng):
    batch = [operands(rng, (40, 64, 24), jnp.float32) for _ in range(3)]
    a, b, bias = (jnp.stack(parts) for parts in zip(*batch, strict=True))
    got = jax.jit(jax.vmap(lambda a, b, bias: fused_matmul(a, b, bias, interpret=True)))(a, b, bias)
    assert_close(got, jax.vmap(fused_matmul_reference)(a, b, bias), rtol_for(jnp.float32))


# --- lowering for the real target, on this host ---------------------------------


def test_forward_and_backward_lower_for_the_target(rng):
    args = operands(rng, (256, 256, 256), jnp.float32)
    forward = target.lower(lambda *a: fused_matmul(*a, interpret=False), *args)
    assert target.KERNEL_CALL in forward
    value_and_grad = jax.value_and_grad(
        lambda *a: jnp.sum(fused_matmul(*a, interpret=False)), argnums=(0, 1, 2)
    )
    # The forward kernel, plus the two backward matmul kernels when asked for.
    calls = target.lower(value_and_grad, *args).count(target.KERNEL_CALL)
    assert calls == (3 if BACKWARD == "kernel" else 1)


def test_bad_block_is_refused_before_lowering(rng):
    args = operands(rng, (256, 300, 256), jnp.float32)
    with pytest.raises(ValueError, match="invalid on"):
        fused_matmul(*args, **target.BAD_BLOCKS)


def test_lowering_catches_what_interpret_mode_accepts(rng, monkeypatch):
    # Without the up-front check, interpret mode runs the bad block happily...
    args = operands(rng, (256, 300, 256), jnp.float32)
    monkeypatch.setattr(kernel, "check_block", lambda *_: None)
    assert_close(
        fused_matmul(*args, **target.BAD_BLOCKS, interpret=True),
        fused_matmul_reference(*args),
        rtol_for(jnp.float32),
    )
    # ...and only lowering for the real target refuses it.
    with pytest.raises(Exception, match=target.BAD_LOWERING):
        target.lower(lambda *a: fused_matmul(*a, **target.BAD_BLOCKS, interpret=False), *args)


# --- on the real target --------------------------------------------------------------


@needs_target
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (200, 300, 130)], ids=str)
def test_native_kernel_matches_reference(rng, shape):
    args = operands(rng, shape, jnp.bfloat16)
    assert_close(
        fused_matmul(*args, interpret=False), fused_matmul_reference(*args), rtol_for(jnp.bfloat16)
    )


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "dtype", "kwargs", "error", "message"),
    [
        (((4,), (4, 2), (2,)), jnp.float32, {}, ValueError, "expected a \\(m, k\\)"),
        (((3, 4), (5, 2), (2,)), jnp.float32, {}, ValueError, "shapes do not agree"),
        (((3, 4), (4, 2), (3,)), jnp.float32, {}, ValueError, "shapes do not agree"),
        (((3, 4), (4, 2), (2,)), jnp.int32, {}, TypeError, "float32 or bfloat16"),
        (((3, 4), (4, 2), (2,)), jnp.float16, {}, TypeError, "float32 or bfloat16"),
        (((0, 4), (4, 2), (2,)), jnp.float32, {}, ValueError, "empty operands"),
        (((3, 4), (4, 2), (2,)), jnp.float32, {"block_m": 0}, ValueError, "positive int"),
        (((3, 4), (4, 2), (2,)), jnp.float32, {"block_n": 2.5}, ValueError, "positive int"),
    ],
)
def test_bad_input_raises_clear_error(shapes, dtype, kwargs, error, message):
    args = [np.ones(shape, dtype) for shape in shapes]
    with pytest.raises(error, match=message):
        fused_matmul(*args, **kwargs)
