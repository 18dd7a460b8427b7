"""The JAX versions this project runs on (pyproject.toml pins the window).
{%- if cookiecutter.backend == "mosaic_gpu" %}
The mosaic_gpu backend needs JAX 0.11 or later: under an older JAX the package
refuses at import, naming the version it needs, rather than failing somewhere
inside JAX.{% else %}
The {{ cookiecutter.backend }} backend runs on every JAX in it.{% endif %}

Run in a fresh interpreter, as the import is what refuses: under JAX 0.10 the
other test modules cannot import the package at all."""

import subprocess
import sys
from pathlib import Path

import jax

from devices import cpu_subprocess_env

ROOT = Path(__file__).resolve().parents[1]
# The oldest JAX the backend supports.
NEEDS = {{ "(0, 11)" if cookiecutter.backend == "mosaic_gpu" else "(0, 10)" }}
INSTALLED = tuple(int(part) for part in jax.__version__.split(".")[:2])


def test_the_package_imports_or_names_the_jax_it_needs():
    command = [sys.executable, "-c", "import {{ cookiecutter.package_name }}"]
    run = subprocess.run(
        command, cwd=ROOT, env=cpu_subprocess_env(), capture_output=True, text=True, timeout=300
    )
    if INSTALLED >= NEEDS:
        assert run.returncode == 0, run.stderr[-3000:]
    else:
        last = run.stderr.strip().splitlines()[-1]
        needs = ".".join(map(str, NEEDS))
        assert last.startswith("ImportError: the {{ cookiecutter.backend }} backend needs"), last
        assert f"JAX >= {needs}" in last and jax.__version__ in last, last
