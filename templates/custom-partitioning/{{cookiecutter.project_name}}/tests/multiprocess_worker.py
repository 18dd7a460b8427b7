"""One of two processes of test_multiprocess.py (not a test itself).

Each process owns 4 CPU devices; together they form one 2 x 4 mesh, and JAX's
own runtime (gloo for CPU collectives) moves data between them, as it would
between hosts.
"""

import sys

import jax

process_id, port = int(sys.argv[1]), sys.argv[2]
jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
# Never from a persistent compilation cache (JAX_COMPILATION_CACHE_DIR, which
# CI setups often set): with JAX 0.12.1 a CPU executable loaded from it leaves
# its collectives waiting for the other process, and the pair hangs until the
# test's timeout (0.10.2 did not).
jax.config.update("jax_enable_compilation_cache", False)
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from {{ cookiecutter.package_name }} import {{ cookiecutter.op_name }} as top_k  # noqa: E402

from oracle import quantized_with_ties, top_k_f64, top_k_vjp_f64  # noqa: E402

K = 4
mesh = jax.make_mesh((2, 4), ("batch", "items"), axis_types=(AxisType.Auto,) * 2)
sharding = NamedSharding(mesh, P("batch", "items"))
# Fixed seeds: every process builds the same inputs. Normal draws, then ties
# that straddle the item shards.
normal = np.random.default_rng(0).standard_normal((8, 512)).astype(np.float32)
tied = quantized_with_ties(np.random.default_rng(2), (8, 512))
cotangent = np.random.default_rng(1).standard_normal((8, K)).astype(np.float32)
top_k_of = jax.jit(lambda x: top_k(x, K))
grad_of = jax.jit(jax.grad(lambda x: jnp.sum(cotangent * top_k(x, K)[0])))


def check(x_host):
    x = jax.make_array_from_callback(x_host.shape, sharding, lambda index: x_host[index])
    with jax.set_mesh(mesh):
        values, indices = top_k_of(x)
        grad = grad_of(x)
    values, indices, grad = (
        multihost_utils.process_allgather(a, tiled=True) for a in (values, indices, grad)
    )
    want_values, want_indices = top_k_f64(x_host, K)
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_allclose(values, want_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, top_k_vjp_f64(x_host, K, cotangent), rtol=1e-5, atol=1e-6)


check(normal)
check(tied)
print(f"process {process_id}: ok on {jax.device_count()} devices", flush=True)
