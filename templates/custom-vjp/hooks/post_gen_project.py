"""Land the shared files and the chosen accelerator workflow (shared_files.land),
and drop the worked example's own tests from a skeleton (example=none)."""

import runpy
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")


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
