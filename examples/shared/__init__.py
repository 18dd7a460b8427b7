"""What several examples use, kept once: not an example itself (no tests, no bench.py).

- hlo.py: the collectives in a compiled program's HLO text, and the bytes each produces;
- timing.py: the median time of jitted calls, as the examples' bench.py report it;
- xla_ffi_module.cmake: the CMake that builds an XLA FFI extension module (examples/ffi and
  the ladder's FFI rung).

The examples import it as `shared.<module>`, with examples/ on sys.path: pytest puts it there
for examples/conftest.py (which also holds the tests' seeded `rng` fixture), and each bench.py
puts it there itself.
"""
