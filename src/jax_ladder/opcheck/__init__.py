"""The conformance matrix, as the kit keeps it: one source for the engine every
generated project carries (templates/shared_files.py writes these modules into
a project's tests/ and benchmarks/ folders, with flat imports).

- conformance: the cells (transformation x sharding x platform) built from an
  op's declaration (OpSpec, Arg), each compared with the plain-JAX reference
  and the float64 oracle;
- compare: the comparison in ulps, per dtype and platform;
- devices: the devices a sharding cell's mesh runs on;
- support_table: the README's table of what passes, refuses or fails;
- plot: the benchmarks' drawing and the chips' peaks.
"""
