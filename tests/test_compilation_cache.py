"""A generated project's tests pass where a persistent JAX compilation cache is
set, as many CI setups set one (and the kit's own runs do, tests/conftest.py).

The two-process test of memory-and-sharding and custom-partitioning hung
there: with JAX 0.12.1 a CPU executable of the jax.distributed pair loaded
from the cache waits for its peer forever, so the second run, which finds the
first's entries, hung to the test's timeout. Their workers now turn the cache
off.
"""

import os
import subprocess
import sys

import pytest
from conftest import battery

from jax_ladder.rungs import by_name
from jax_ladder.scaffold import scaffold

# The templates with a jax.distributed test (tests/test_multiprocess.py).
RUNGS = [by_name("memory-and-sharding"), by_name("custom-partitioning")]


@pytest.mark.parametrize("rung", [pytest.param(r, marks=battery(r), id=r.name) for r in RUNGS])
def test_the_two_process_test_passes_again_from_a_warm_cache(tmp_path, rung):
    project = scaffold(rung, tmp_path / "bake", {})
    env = {
        **os.environ,
        "PYTHONPATH": str(project / "src"),
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
    command += ["tests/test_multiprocess.py::test_two_processes_agree_with_the_oracle"]
    for attempt in ("cold", "warm"):
        try:  # (the test's own timeout, 240 s, kills its two processes first)
            run = subprocess.run(
                command, cwd=project, env=env, capture_output=True, text=True, timeout=400
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"the {attempt} cache's run hung")
        assert run.returncode == 0, f"{attempt}: {run.stdout[-3000:]}"
        assert "1 passed" in run.stdout, run.stdout[-3000:]
