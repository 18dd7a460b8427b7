"""Land the shared files and the chosen accelerator workflow (shared_files.land),
and drop the example's own files from a skeleton (see drop_example_files)."""

import runpy
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")


def drop_example_files(example):
    """example=none: the skeleton has no hand-written NumPy oracle of the
    example's block (tests/test_reference.py), nor the example's measured
    plot (docs/benchmark.svg)."""
    if example == "none":
        Path("tests/test_reference.py").unlink()
        Path("docs/benchmark.svg").unlink()


drop_example_files("{{ cookiecutter.example }}")
