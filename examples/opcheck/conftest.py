"""What the conformance engine needs, before JAX starts its backend (pytest
imports this first): eight CPU devices for the mesh cells, float64 for the
oracles. A generated project's tests/conftest.py does the same."""

import jax

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", True)
