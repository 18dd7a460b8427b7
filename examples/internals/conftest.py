"""Shared test setup: float64 and the CPU as the default device (the seeded `rng` fixture
is examples/conftest.py's).

The tests compare float32 with float64, so float64 must be enabled before any test builds an
array; every array the tests build has an explicit dtype.

The tests run on the CPU device whatever the host (the default device below). They check the
primitive's rules, not an accelerator's arithmetic: float64 on a TPU is emulated (not IEEE,
results hundreds of float64 ulps off), float32 matmuls there default to one bfloat16 pass, and
second-order `check_grads` and the other many-small-step checks took minutes there. bench.py is
what times the default device.
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_device", "cpu")
