"""Shared test setup: the CPU as the default device, float64, and a clear word when the FFI module
is missing (the seeded `rng` fixture is examples/conftest.py's).

The handler is CPU-only (tridiagonal.py), so the tests run on the CPU device also where the
default backend is a GPU: there the plain-JAX oracles would run on the GPU and the FFI calls,
inside a jit, would be refused. test_tridiagonal.py checks that refusal, and on a machine with
an accelerator the placement, explicitly.

The tests that need the compiled handler skip (pytest.importorskip in each of those modules)
when `tridiagonal` cannot load it; its ImportError says how to build it, and the summary line
below repeats that, since `pytest -q` hides skip reasons. The oracle tests
(test_reference.py) need no build and run regardless.

float64 is for the float64 cases and the NumPy comparisons; every array the tests build has an
explicit dtype, so it does not change what the float32 tests compute.
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_device", "cpu")

try:
    import tridiagonal  # noqa: F401  (loads and registers the handler, or says why not)

    FFI_MISSING = None
except ImportError as err:
    FFI_MISSING = str(err)


def pytest_terminal_summary(terminalreporter):
    if FFI_MISSING:
        terminalreporter.write_line(f"examples/ffi: FFI tests SKIPPED: {FFI_MISSING}")
