"""Keep only the chosen backend: its kernel as src/<package>/kernel.py and its
test helpers as tests/target.py; and the chosen accelerator workflow, if any."""

import shutil
from pathlib import Path

backend = "{{ cookiecutter.backend }}"
(Path("_kernels") / f"{backend}.py").replace(Path("src/{{ cookiecutter.package_name }}/kernel.py"))
(Path("_targets") / f"{backend}.py").replace(Path("tests/target.py"))
shutil.rmtree("_kernels")
shutil.rmtree("_targets")


def keep_accelerator_workflow(choice):
    """The accelerator_ci option: move _accelerator_ci/<choice>.yml to
    .github/workflows/accelerator.yml (for "none", nothing), then drop the
    folder. The workflows are plain files, so they stay free of Jinja."""
    if choice != "none":
        Path(f"_accelerator_ci/{choice}.yml").replace(Path(".github/workflows/accelerator.yml"))
    shutil.rmtree("_accelerator_ci")


keep_accelerator_workflow("{{ cookiecutter.accelerator_ci }}")
