"""benchmarks/bench.py's reference copies, whose bandwidth the "of copy" and
"of fresh" columns divide by: jitted XLA programs on the device that holds the
op's operands (on a GPU, the GPU's memory, not the host's), each returning a
copy of x there."""

import sys
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench  # noqa: E402  (benchmarks/bench.py)


def operand(device):
    return jax.device_put(jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32), device)


def test_the_copies_run_on_the_operands_device():
    # Not the default device: a copy that ignored x's device would land elsewhere.
    device = jax.devices("cpu")[-1]
    x = operand(device)
    for copy in bench.copies(x):
        for _ in range(2):  # twice: the copy into a buffer in use donates that buffer
            y = jax.block_until_ready(copy(x, x))  # called as the op is: with its operands
            assert isinstance(y, jax.Array), f"{copy.__name__} returned {type(y).__name__}"
            assert y.devices() == {device}, copy.__name__
            np.testing.assert_array_equal(y, x)


def test_the_copy_into_memory_in_use_writes_into_the_same_buffer():
    into_used, into_fresh = bench.copies(operand(jax.devices("cpu")[0]))
    x = operand(jax.devices("cpu")[0])
    address = into_used(x).unsafe_buffer_pointer()
    assert into_used(x).unsafe_buffer_pointer() == address  # donated: no new allocation
    assert into_fresh(x).unsafe_buffer_pointer() != address


@pytest.mark.parametrize("cuda", [False, True])
def test_the_benchmark_runs_where_the_build_has_a_handler(cuda):
    cpu = jax.devices("cpu")[0]
    assert bench.bench_device(cpu, cuda) == cpu
    gpu = SimpleNamespace(platform="gpu")  # JAX's name for an NVIDIA GPU's platform
    assert bench.bench_device(gpu, cuda) == (gpu if cuda else cpu)
    assert bench.bench_device(SimpleNamespace(platform="tpu"), cuda) == cpu
