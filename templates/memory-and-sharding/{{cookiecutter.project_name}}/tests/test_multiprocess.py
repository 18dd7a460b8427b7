"""The path to many hosts: two processes on localhost, 4 CPU devices each,
run one training step across all 8 with jax.distributed."""

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from compare import assert_close
from devices import free_port
from op_spec import STEPS
from oracle import PROCESSES_PROBLEM, make_problem, step_f64

HERE = Path(__file__).resolve().parent


def test_without_sockets_the_two_processes_skip_naming_them(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")

    monkeypatch.setattr(socket, "socket", refuse)
    reason = "^missing facility: no TCP socket can be opened on the loopback: .*not supported"
    with pytest.raises(pytest.skip.Exception, match=reason):
        free_port()


def test_two_processes_agree_with_the_oracle(tmp_path):
    port = str(free_port())
    src = str(HERE.parent / "src")
    path = os.pathsep.join(filter(None, [src, str(HERE), os.environ.get("PYTHONPATH")]))
    # CPU devices only, as the workers expect: on a GPU runner both processes
    # would otherwise share its one GPU (each preallocating most of its memory).
    env = dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu")
    worker = str(HERE / "multiprocess_worker.py")
    procs = [
        subprocess.Popen(
            [sys.executable, worker, str(i), port, str(tmp_path / "step.npz")],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            proc.kill()  # never leave a process waiting for its peer
    for i, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, output[-3000:]
        assert f"process {i}: ok on 8 devices" in output
    # The same problem as the workers', from the same seed.
    params, x, y = make_problem(np.random.default_rng(0), **PROCESSES_PROBLEM)
    momentum = [tuple(np.ones_like(w) for w in weights) for weights in params]
    want = jax.tree.leaves(step_f64(params, momentum, x, y))
    with np.load(tmp_path / "step.npz") as got:
        assert len(got.files) == len(want)
        for i, w in enumerate(want):
            assert_close(got[f"arr_{i}"], w, STEPS)
