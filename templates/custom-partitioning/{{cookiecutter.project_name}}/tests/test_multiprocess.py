"""The path to many hosts: two processes on localhost, 4 CPU devices each,
run tests/multiprocess_worker.py across all 8 with jax.distributed, and the
worker holds the results to the oracle."""

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from devices import cpu_subprocess_env, free_port

HERE = Path(__file__).resolve().parent


def test_without_sockets_the_two_processes_skip_naming_them(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")

    monkeypatch.setattr(socket, "socket", refuse)
    reason = "^missing facility: no TCP socket can be opened on the loopback: .*not supported"
    with pytest.raises(pytest.skip.Exception, match=reason):
        free_port()


def test_two_processes_agree_with_the_oracle():
    port = str(free_port())
    src = str(HERE.parent / "src")
    path = os.pathsep.join(filter(None, [src, str(HERE), os.environ.get("PYTHONPATH")]))
    # CPU devices only, as the workers expect: on a GPU runner both processes
    # would otherwise share its one GPU (each preallocating most of its memory).
    env = cpu_subprocess_env(PYTHONPATH=path)
    worker = str(HERE / "multiprocess_worker.py")
    procs = [
        subprocess.Popen(
            [sys.executable, worker, str(i), port],
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
            proc.wait()  # and reap it, so no warning of it reaches the next test
    for i, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, output[-3000:]
        assert f"process {i}: ok on 8 devices" in output
