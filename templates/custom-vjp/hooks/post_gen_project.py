"""Keep the chosen accelerator workflow, if any (see keep_accelerator_workflow),
and drop the worked example's own tests from a skeleton (example=none)."""

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


keep_accelerator_workflow("{{ cookiecutter.accelerator_ci }}")


def drop_example_tests(example, op_name):
    """example=none: the skeleton has no example-specific tests (the conformance
    matrix and tests/test_reference.py work from tests/op_spec.py alone), nor
    the example's measured benchmark plots (docs/benchmark.md says how to draw one)."""
    if example == "none":
        for path in (
            f"tests/test_{op_name}.py",
            "tests/oracle.py",
            "docs/benchmark.svg",
            "docs/benchmark-tpu.svg",
        ):
            Path(path).unlink()


drop_example_tests("{{ cookiecutter.example }}", "{{ cookiecutter.op_name }}")
