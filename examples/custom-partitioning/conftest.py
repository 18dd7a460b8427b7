"""Shared test setup: eight simulated CPU devices, the CPU as the default device, float64
(the seeded `rng` fixture, and the worst error printed after the run, are
examples/conftest.py's).

`jax_num_cpu_devices` only takes effect before JAX starts its backend, which is why it is set
here: pytest imports conftest.py before the test modules, and nothing before it touches a
device. (XLA_FLAGS=--xla_force_host_platform_device_count=8 does the same.) float64 is for the
float64 cases; every array the tests build has an explicit dtype.

The tests run on those CPU devices whatever the host: the meshes are built from
`jax.devices("cpu")` (test_prefix_sum.make_mesh), and the CPU is the default device, so the
oracles and the unsharded calls run there too. A host with one accelerator has no 8-device mesh,
and float64 on a TPU is emulated (not IEEE, and slow): the examples check the partitioning
rule's math, which the simulated devices show, not the accelerator's arithmetic.
"""

import jax

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_device", "cpu")
