"""Shared test setup, as in examples/custom-partitioning: eight simulated CPU devices (set
before JAX starts its backend, which pytest's import of conftest.py precedes), float64 for the
float64 cases, and the CPU as the default device. The meshes are `jax.devices("cpu")`
(test_wave2d.make_mesh) whatever the host, so the tests check the halo exchange's math and the
compiled program's collectives, not an accelerator's arithmetic (a host with one accelerator
has no 8-device mesh; a TPU emulates float64). bench.py uses an accelerator's devices where it
has eight. The seeded `rng` fixture, and the worst error printed after the run, are
examples/conftest.py's.
"""

import jax

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_device", "cpu")
