"""One of two processes of test_multiprocess.py (not a test itself).

Each process owns 4 CPU devices; together they form one mesh of 8, and JAX's
own runtime (gloo for CPU collectives) moves data between them, as it would
between hosts. Process 0 holds the step's results, gathered, to the float64
oracle (jax_enable_x64, as the tests enable it).
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
jax.config.update("jax_enable_x64", True)
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from {{ cookiecutter.package_name }} import make_mesh, train_step  # noqa: E402
from {{ cookiecutter.package_name }}.sharded_step import BATCH_SPEC, SPECS  # noqa: E402

from compare import assert_close  # noqa: E402
from op_spec import STEPS  # noqa: E402
from oracle import PROCESSES_PROBLEM, make_problem, step_f64  # noqa: E402

mesh = make_mesh()  # every device of both processes
# A fixed seed: every process builds the same host arrays, and each places
# only the shards its own devices hold.
params, x, y = make_problem(np.random.default_rng(0), **PROCESSES_PROBLEM)
momentum = [tuple(np.ones_like(w) for w in weights) for weights in params]


def place(host, spec):
    sharding = NamedSharding(mesh, spec)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


with jax.set_mesh(mesh):
    state = [
        [tuple(place(w, s) for w, s in zip(weights, SPECS, strict=True)) for weights in tree]
        for tree in (params, momentum)
    ]
    got = train_step(*state, place(x, BATCH_SPEC), place(y, BATCH_SPEC))
got = jax.tree.map(lambda a: multihost_utils.process_allgather(a, tiled=True), got)
if process_id == 0:  # the oracle runs on the CPU device 0, which this process holds
    want = jax.tree.leaves(step_f64(params, momentum, x, y))
    for g, w in zip(jax.tree.leaves(got), want, strict=True):
        assert_close(np.asarray(g), w, STEPS)
print(f"process {process_id}: ok on {jax.device_count()} devices", flush=True)
