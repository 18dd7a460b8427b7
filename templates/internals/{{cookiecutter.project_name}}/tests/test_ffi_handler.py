"""The example's C++ handler behind the CPU lowering: the lowering chooses it per
platform, and it refuses, with its own message, buffers that disagree (which
nothing else in XLA checks)."""

import jax
import jax.numpy as jnp
import pytest
{%- if cookiecutter.api == "hijax" %}
from jax.experimental import hijax

# api=hijax needs JAX 0.11 (HiPrim): under 0.10 the package refuses to import,
# which tests/test_jax_api_surface.py checks; the rest of the suite skips.
if not hasattr(hijax, "HiPrim"):
    pytest.skip("api=hijax needs JAX 0.11 or newer", allow_module_level=True)

# isort: split
{%- endif %}

from {{ cookiecutter.package_name }}.ffi_target import TARGET

from compare import assert_close
from op_spec import SPEC, VALUES, matvec_f64

matvec = SPEC.op
NAME = SPEC.name  # the op's name, which its error messages start with


@pytest.fixture(autouse=True)
def on_cpu():
    """The handler is the CPU's: call it there even where JAX's default device
    is a GPU (the accelerator workflow)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def operands(rng, shape, dtype="float32"):
    return [jnp.asarray(rng.standard_normal(shape), dtype) for _ in range(4)]


def test_lowering_is_the_custom_call_on_cpu_only(rng):
    traced = jax.jit(matvec).trace(*operands(rng, (3, 8)))
    assert f"custom_call @{TARGET}(" in traced.lower(lowering_platforms=("cpu",)).as_text()
    # Elsewhere, existing StableHLO operations (this project has no CUDA handler).
    for platform in ("cuda", "tpu"):
        assert "custom_call" not in traced.lower(lowering_platforms=(platform,)).as_text()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_handler_called_directly_matches_float64_oracle(rng, dtype):
    args = operands(rng, (5, 17), dtype)
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(args[3].shape, args[3].dtype))
    assert_close(call(*args), matvec_f64(*args), VALUES)


@pytest.mark.parametrize(
    ("change", "result_shape", "message"),
    [
        # A larger result: the handler would write only part of it.
        (lambda a: a, (3, 9), r"output y has shape \(3, 9\), expected \(3, 8\)"),
        (lambda a: [a[0][:, :7], *a[1:]], (3, 8), r"dl has shape \(3, 7\), expected \(3, 8\)"),
        (lambda a: [a[0], a[1].astype(jnp.float64), *a[2:]], (3, 8), "d has dtype float64"),
        (lambda a: [x.astype(jnp.int32) for x in a], (3, 8), "unsupported dtype int32"),
    ],
    ids=["result-shape", "operand-shape", "dtype", "integer"],
)
def test_handler_refuses_mismatched_buffers(rng, change, result_shape, message):
    # Called directly, bypassing the primitive's own checks at trace time.
    args = change(operands(rng, (3, 8)))
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(result_shape, args[3].dtype))
    with pytest.raises(jax.errors.JaxRuntimeError, match=f"{NAME}: {message}"):
        jax.block_until_ready(call(*args))
