"""Many pytest runs in one project, each in a fresh process, without paying
for JAX's import each time.

A mutant's run starts Python, imports jax, numpy and pytest, collects and
runs a few tests; the imports are a few CPU seconds of each run, and the
kit runs some 160 mutants. The server below imports them once and forks a
child per run: the child imports the project itself (never the server, so a
mutated file or a rebuilt extension module is read fresh), runs
`pytest.main` and exits with its status. Forking is safe here because the
server never starts a JAX backend (JAX's threads start with it, and JAX
warns about forking only once they have).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SERVER = r"""
import json, os, sys
import jax, jax.numpy, numpy, pytest  # what every run imports: once, here

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        if request.get("cwd"):  # a run in another project than the server's
            os.chdir(request["cwd"])
            sys.path[:0] = request["path"]
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(log, 1)
        os.dup2(log, 2)
        status = pytest.main(request["argv"])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class ForkedPytest:
    """`run(args, timeout)` -> (status, output) of `pytest ARGS` in `project`,
    with `env`; -1 and "timed out" when a run takes longer than timeout."""

    def __init__(self, project: Path, env: dict[str, str]):
        self.project, self.env = project, env
        self._scratch = Path(tempfile.mkdtemp(prefix="forked-pytest-"))
        self.log = self._scratch / "run.log"
        self._server: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self._server is None or self._server.poll() is not None:
            self._server = subprocess.Popen(
                [sys.executable, "-c", SERVER],
                cwd=self.project,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        return self._server

    def run(
        self, args: list[str], timeout: float, cwd: Path | None = None, path: tuple[str, ...] = ()
    ) -> tuple[int, str]:
        """`cwd` and `path`: run in another project, with `path` first on sys.path."""
        server = self._start()
        assert server.stdin is not None
        assert server.stdout is not None
        request = {"argv": args, "log": str(self.log), "cwd": str(cwd or ""), "path": list(path)}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        child = int(server.stdout.readline())
        timer = _Timer(timeout, lambda: _kill(child))
        try:
            status = int(server.stdout.readline())
        finally:
            timed_out = timer.cancel()
        output = self.log.read_text(errors="replace")
        return (-1, "timed out") if timed_out else (status, output)

    def close(self) -> None:
        if self._server is not None and self._server.stdin is not None:
            self._server.stdin.close()
            self._server.wait()
        shutil.rmtree(self._scratch, ignore_errors=True)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.kill(pid, signal.SIGKILL)


class _Timer:
    """Calls `action` after `seconds` unless cancelled first; `cancel()` says
    whether it had fired."""

    def __init__(self, seconds: float, action):
        self._fired = threading.Event()

        def fire():
            self._fired.set()
            action()

        self._timer = threading.Timer(seconds, fire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> bool:
        self._timer.cancel()
        return self._fired.is_set()
