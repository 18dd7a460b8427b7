"""Write the golden artifact (tests/golden/) at generation time, from the op
the project was generated with, so the golden test has an artifact exported by
the JAX that created the project; keep the chosen accelerator workflow, if
any; drop the example's own tests where they do not apply."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def keep_accelerator_workflow(choice):
    """The accelerator_ci option: move _accelerator_ci/<choice>.yml to
    .github/workflows/accelerator.yml (for "none", nothing), then drop the
    folder. The workflows are plain files, so they stay free of Jinja."""
    if choice != "none":
        Path(f"_accelerator_ci/{choice}.yml").replace(Path(".github/workflows/accelerator.yml"))
    shutil.rmtree("_accelerator_ci")


keep_accelerator_workflow("{{ cookiecutter.accelerator_ci }}")

# The example's own tests (the masked sequence model's edges) go with the
# example: the skeleton and the batch-only model have none.
if "{{ cookiecutter.example }}" == "none" or "{{ cookiecutter.symbolic_dims }}" != "batch,seq":
    Path("tests/test_{{ cookiecutter.op_name }}.py").unlink()
    # The measured plot is the worked example's, with its sequence axis: the
    # skeleton and the batch-only model draw their own (docs/benchmark.md says how).
    Path("docs/benchmark.svg").unlink()

# PYTHONDONTWRITEBYTECODE: importing the new package from src/ would otherwise
# leave src/<package>/__pycache__/ in the freshly generated project.
env = dict(
    os.environ, PYTHONPATH=os.path.abspath("src"), JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1"
)
command = [sys.executable, "-m", "{{ cookiecutter.package_name }}", "export", "--golden"]
result = subprocess.run(command, env=env, capture_output=True, text=True)
if result.returncode != 0:
    # Not fatal: without JAX here the project is still complete, and the golden
    # test tells the user to run this command after installing it.
    reason = (result.stderr.strip().splitlines() or ["unknown error"])[-1]
    print(f"note: the golden artifact was not written ({reason}); after installing the "
          "project run: python -m {{ cookiecutter.package_name }} export --golden")
