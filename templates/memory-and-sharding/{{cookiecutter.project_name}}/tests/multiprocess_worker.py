"""One of two processes of test_multiprocess.py (not a test itself).

Each process owns 4 CPU devices; together they form one mesh of 8, and JAX's
own runtime (gloo for CPU collectives) moves data between them, as it would
between hosts.
"""

import sys

import jax

process_id, port = int(sys.argv[1]), sys.argv[2]
jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from {{ cookiecutter.package_name }} import make_mesh, train_step  # noqa: E402
from {{ cookiecutter.package_name }}.sharded_step import BATCH_SPEC, W_IN_SPEC, W_OUT_SPEC  # noqa: E402

from compare import assert_close  # noqa: E402
from oracle import STEPS, make_problem, step_f64  # noqa: E402

mesh = make_mesh()  # every device of both processes
# A fixed seed: every process builds the same host arrays, and each places
# only the shards its own devices hold.
params, x, y = make_problem(np.random.default_rng(0))
momentum = [(np.ones_like(a), -np.ones_like(b)) for a, b in params]


def place(host, spec):
    sharding = NamedSharding(mesh, spec)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


with jax.set_mesh(mesh):
    state = [
        [(place(a, W_IN_SPEC), place(b, W_OUT_SPEC)) for a, b in tree]
        for tree in (params, momentum)
    ]
    got = train_step(*state, place(x, BATCH_SPEC), place(y, BATCH_SPEC))
got = jax.tree.map(lambda a: multihost_utils.process_allgather(a, tiled=True), got)
for g, want in zip(
    jax.tree.leaves(got), jax.tree.leaves(step_f64(params, momentum, x, y)), strict=True
):
    assert_close(g, want, STEPS)
print(f"process {process_id}: ok on {jax.device_count()} devices", flush=True)
