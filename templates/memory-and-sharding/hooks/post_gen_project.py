"""Keep the chosen accelerator workflow, if any (see keep_accelerator_workflow),
and drop the example's own files from a skeleton (see drop_example_files)."""

import runpy
import shutil
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged: into place
# first (templates/shared_files.py in the kit), as the steps below move or drop some.
runpy.run_path(".jax-ladder-shared/shared_files.py")["land"](Path.cwd())


def keep_accelerator_workflow(choice):
    """The accelerator_ci option: move _accelerator_ci/<choice>.yml to
    .github/workflows/accelerator.yml (for "none", nothing), then drop the
    folder. The workflows are plain files, so they stay free of Jinja."""
    if choice != "none":
        Path(f"_accelerator_ci/{choice}.yml").replace(Path(".github/workflows/accelerator.yml"))
    shutil.rmtree("_accelerator_ci")


def drop_example_files(example):
    """example=none: the skeleton has no hand-written NumPy oracle of the
    example's block (tests/test_reference.py), nor the example's measured
    plot (docs/benchmark.svg)."""
    if example == "none":
        Path("tests/test_reference.py").unlink()
        Path("docs/benchmark.svg").unlink()


keep_accelerator_workflow("{{ cookiecutter.accelerator_ci }}")
drop_example_files("{{ cookiecutter.example }}")
