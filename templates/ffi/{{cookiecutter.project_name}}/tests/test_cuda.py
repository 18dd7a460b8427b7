"""The CUDA handler: that the build compiled it wherever a CUDA compiler was
found, and, on a machine with an NVIDIA GPU and a CUDA-enabled jaxlib, that it
agrees with the reference. The GPU tests skip elsewhere."""

import os
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from {{ cookiecutter.package_name }} import cuda_available

from compare import assert_close
from conformance import oracle, vjp_oracle
from op_spec import SPEC

op, reference = SPEC.op, SPEC.reference
VALUES, GRADIENTS = SPEC.tolerance, SPEC.gradient_tolerance


def find_nvcc():
    """Where CMake's check_language(CUDA) would look: $CUDACXX, PATH, CUDA_HOME."""
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(str(Path(home) / "bin" / "nvcc"))
    return next((c for c in candidates if c and Path(c).is_file()), None)


def gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


@pytest.mark.skipif(find_nvcc() is None, reason="no CUDA compiler here, so none was built")
def test_build_contains_the_cuda_handler():
    assert cuda_available(), (
        f"{find_nvcc()} exists but the extension has no CUDA handler: rebuild "
        "(pip install -e .) and look for 'CUDA handler:' in the CMake output"
    )


requires_gpu = pytest.mark.skipif(not gpus(), reason="needs an NVIDIA GPU and jax[cuda]")


@pytest.fixture
def gpu():
    with jax.default_device(gpus()[0]):
        yield gpus()[0]


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("shape", [(7,), (3, 1), (4096, 8), (2, 3, 4, 1000)], ids=str)
def test_gpu_values_match_reference(rng, gpu, shape, dtype):
    assert cuda_available(), "a GPU is present but the extension was built without CUDA"
    x = jax.device_put(jnp.asarray(rng.standard_normal(shape), dtype), gpu)
    y = jax.jit(op)(x)
    assert y.devices() == {gpu}
    assert_close(y, reference(x), VALUES)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gpu_sums_in_double_where_float32_overflows(rng, gpu, dtype):
    # Squares of 1e20 overflow float32: the CUDA kernels accumulate in double,
    # like the CPU handler (tests/test_kernel_check.py checks the same
    # rows on the CPU).
    x = jax.device_put(jnp.asarray(1e20 * rng.standard_normal((4, 1000)), dtype), gpu)
    assert_close(jax.jit(op)(x), oracle(SPEC, [x])[0], VALUES)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_gradient_and_vmap(rng, gpu, dtype):
    x = jax.device_put(jnp.asarray(rng.standard_normal((6, 5, 300)), dtype), gpu)
    cotangent = jax.device_put(jnp.asarray(rng.standard_normal((6, 5, 300)), dtype), gpu)
    got = jax.jit(jax.vmap(jax.grad(lambda x, g: jnp.sum(g * op(x)))))(x, cotangent)
    assert_close(got, vjp_oracle(SPEC, [x], [cotangent])[0], GRADIENTS)


@requires_gpu
def test_gpu_bad_input_raises_the_handler_message(gpu):
    with pytest.raises(jax.errors.JaxRuntimeError, match="unsupported dtype int32"):
        jax.block_until_ready(op(jax.device_put(jnp.ones((2, 3), jnp.int32), gpu)))
    x = jnp.ones((2, 3), jnp.float32)
    assert_close(op(x), oracle(SPEC, [x])[0], VALUES)
