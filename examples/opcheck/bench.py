"""Each op of specs.py against its plain-JAX reference, jitted, on the
default device: the time per call and the ratio (reference / op: above 1x the
op is faster). The declarations' sizes are the conformance matrix's, too small
to say much; --quick times fewer calls. Off a TPU the Pallas kernel runs in
the TPU interpreter, thousands of times slower than XLA's dot.

    PYTHONPATH=src python examples/opcheck/bench.py [--quick]
"""

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import specs

from jax_ladder.opcheck.conformance import make_args


def seconds_per_call(fn, args, calls):
    jax.block_until_ready(fn(*args))  # compile
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    calls = 20 if parser.parse_args().quick else 200
    print(f"{'op':45} {'op (us)':>10} {'reference (us)':>15} {'ratio':>8}")
    # float32 only (float64 is off here, so optax's projection returns float32),
    # and the matmul once. Off a TPU the kernel is interpreted: a check, not a speed.
    left_out = (getattr(specs, "SIMPLEX_64", None), specs.MATMUL_RAGGED)
    for spec in [s for s in specs.SPECS if all(s is not other for other in left_out)]:
        args = make_args(spec, np.random.default_rng(0))
        op = seconds_per_call(jax.jit(spec.op), args, calls)
        reference = seconds_per_call(jax.jit(spec.reference), args, calls)
        print(f"{spec.name:45} {op * 1e6:10.1f} {reference * 1e6:15.1f} {reference / op:7.3g}x")


if __name__ == "__main__":
    main()
