"""Shared test setup: eight simulated CPU devices and a clear word when the FFI rung's compiled
module is missing (the seeded `rng` fixture is examples/conftest.py's).

`jax_num_cpu_devices` only takes effect before JAX starts its backend: pytest imports
conftest.py before the test modules, and nothing before it touches a device. The tests run on
the default device; the sharding test's mesh is the default platform's devices where it has 8,
else these simulated CPU devices (shared/devices.py), and the FFI rung, whose handlers are CPU-only,
runs on the CPU device (test_ladder.py's `rung` fixture).
"""

import jax
from shared.devices import SIMULATED_MESHES

jax.config.update("jax_num_cpu_devices", 8)

try:
    import ffi_handler  # noqa: F401  (loads and registers the handlers, or says why not)

    FFI_MISSING = None
except ImportError as err:
    FFI_MISSING = str(err)


def pytest_terminal_summary(terminalreporter):
    for platform, count in SIMULATED_MESHES.items():
        terminalreporter.write_line(
            f"sharding: meshes of simulated CPU devices, as {platform} has {count} device(s)"
        )
    if FFI_MISSING:
        terminalreporter.write_line(f"examples/ladder: FFI rung SKIPPED: {FFI_MISSING}")
