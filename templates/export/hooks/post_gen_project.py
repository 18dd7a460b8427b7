"""Write the golden artifact (tests/golden/) at generation time, from the op
the project was generated with, so the golden test has an artifact exported by
the JAX that created the project; land the shared files and the chosen
accelerator workflow; drop the example's own tests where they do not apply."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")


# The example's own tests (the masked sequence model's edges) go with the
# example: the skeleton and the batch-only model have none.
if "{{ cookiecutter.example }}" == "none" or "{{ cookiecutter.symbolic_dims }}" != "batch,seq":
    Path("tests/test_{{ cookiecutter.op_name }}.py").unlink()
    # The measured plots (CPU, TPU) are the worked example's, with its sequence axis:
    # the skeleton and the batch-only model draw their own (docs/benchmark.md says how).
    Path("docs/benchmark.svg").unlink()
    Path("docs/benchmark-tpu.svg").unlink()

# src/ goes in front of PYTHONPATH, not in its place: some images (a TPU VM's)
# provide JAX through PYTHONPATH alone. PYTHONDONTWRITEBYTECODE: importing the
# new package from src/ would otherwise leave src/<package>/__pycache__/ in the
# freshly generated project.
path = os.pathsep.join(filter(None, [str(Path("src").resolve()), os.environ.get("PYTHONPATH")]))
env = dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "export", "--golden"]
result = subprocess.run(command, env=env, capture_output=True, text=True)
reason = (result.stderr.strip().splitlines() or ["unknown error"])[-1]
if result.returncode != 0 and reason.startswith("ModuleNotFoundError"):
    # Not fatal: without JAX (or one of the project's dependencies) here the
    # project is still complete, and the golden tests skip, saying to run this
    # command after installing it.
    print(f"note: the golden artifact was not written ({reason}); after installing the "
          "project run: python -m {{ cookiecutter.package_name }} export --golden")
elif result.returncode != 0:
    # Fatal: this Python has what the project needs, yet the project cannot
    # export its own model here (Python 3.12 syntax under 3.11 was one such
    # case). Left quiet, that shipped a project whose golden tests skip.
    sys.exit(f"error: the new project could not export its model with {sys.executable} "
             f"(Python {sys.version.split()[0]}), so its golden artifact was not "
             f"written:\n{result.stderr.strip()}")
