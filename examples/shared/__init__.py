"""What several examples use, kept once: not an example itself (no tests, no bench.py).

- cpu_ffi.py: loading a CPU-only FFI handler's compiled module, and the primitive that
  refuses, in words, to lower it for another platform (examples/ffi, the ladder's FFI rung);
- devices.py: the devices a mesh is built from, and the check that tests run on the CPU;
- hlo.py: the collectives in a compiled program's HLO text, and the bytes each produces;
- timing.py: the median time of jitted calls, and the --quick command line of every bench.py;
- worst.py: the worst error / bound a test run saw, which examples/conftest.py prints;
- xla_ffi_module.cmake: the CMake that builds an XLA FFI extension module (examples/ffi and
  the ladder's FFI rung).

The examples import it as `shared.<module>`, with examples/ on sys.path: pytest puts it there
for examples/conftest.py (which also holds the tests' seeded `rng` fixture), and each bench.py
puts it there itself.
"""
