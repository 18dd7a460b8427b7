"""The machine the tests run on: the devices a test's mesh runs on, the
environment of a Python subprocess, a free port on the loopback, and how a
test names a facility the machine lacks. One home for these rules, imported
by tests/conftest.py, the conformance matrix and the op's own tests, and safe
for benchmarks/bench.py to import too (it changes no JAX setting: the 8
simulated CPU devices and float64 are turned on by tests/conftest.py alone)."""

import os
import socket

import jax


def default_platform() -> str:
    """Where a test's computations run unless it places them: the platform of
    jax_default_device, where a project pins its tests to one (ffi's CPU
    handler), else JAX's default backend."""
    default = jax.config.jax_default_device
    return getattr(default, "platform", default) or jax.default_backend()


def mesh_devices(count):
    """The devices for a sharding test's mesh of `count`: those of the default
    device's platform (jax_default_device, where a project pins its tests to
    one) or else the default backend's, where there are that many (a runner
    with 8 GPUs tests them); else the simulated CPU devices, so that a runner
    with one GPU still checks the sharding rules, which are the same on every
    platform, instead of failing to build the mesh."""
    devices = jax.devices(default_platform())
    if len(devices) >= count:
        return devices[:count]
    if devices[0].platform != "cpu":
        SIMULATED_MESHES[devices[0].platform] = len(devices)
    return jax.devices("cpu")[:count]


# The accelerator platforms whose sharding tests ran on simulated CPU devices
# instead (platform: its device count), for the run's summary: there, a
# compiled kernel runs interpreted, or the op refuses with its reason.
SIMULATED_MESHES: dict[str, int] = {}


def cpu_subprocess_env(**extra):
    """The environment for a JAX program a test starts as a subprocess: on the
    CPU. A TPU may be opened by one program at a time, and the test run
    holds it; a second program that tries fails ("libtpu multi-process
    lockfile"). A test that needs the accelerator runs it in-process."""
    return {**os.environ, "JAX_PLATFORMS": "cpu", **extra}


# How a test that needs what this machine lacks (a TCP socket on the loopback,
# a working AddressSanitizer) starts its skip reason: found by probing the
# facility, never by the platform's name. Under REQUIRE_ACCELERATOR such a skip
# stays a skip (conftest.py): the operating system lacks it, not the accelerator.
MISSING_FACILITY = "missing facility: "


def free_port() -> int:
    """A free TCP port on the loopback (jax.distributed's coordinator, say), once a
    connection on the loopback went through; a test that asks skips where none can (a
    sandbox without sockets, a network namespace whose loopback is down)."""
    import pytest  # here, not at the top: benchmarks/bench.py imports this module

    try:
        with socket.socket() as server:  # the probe, on a port of its own
            server.bind(("127.0.0.1", 0))
            server.listen()
            server.settimeout(10)
            with socket.create_connection(server.getsockname(), timeout=10):
                server.accept()[0].close()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as err:
        pytest.skip(f"{MISSING_FACILITY}no TCP socket can be opened on the loopback: {err}")
