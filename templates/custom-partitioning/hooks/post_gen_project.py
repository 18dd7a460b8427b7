"""Land the shared files and the chosen accelerator workflow (shared_files.land),
and lay out the worked example or the skeleton (see keep_example)."""

import runpy
import shutil
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")

# The worked example's own files: its tests, its float64 NumPy oracle, the
# two-process test and its measured benchmark plot. The skeleton
# (example=none) has none of them.
EXAMPLE_ONLY = [
    "docs/benchmark.svg",
    "tests/test_{{ cookiecutter.op_name }}.py",
    "tests/oracle.py",
    "tests/test_reference.py",
    "tests/test_multiprocess.py",
    "tests/multiprocess_worker.py",
]
# Where the skeleton's two files go (each replaces the example's; tests/op_spec.py
# is one template for both).
SKELETON = {
    "_skeleton/reference.py": "src/{{ cookiecutter.package_name }}/reference.py",
    "_skeleton/op.py": "src/{{ cookiecutter.package_name }}/{{ cookiecutter.op_name }}.py",
}


def keep_example(example):
    """The example option: "none" moves the skeleton's reference and op over
    the example's and deletes the example's own files; otherwise the skeleton
    goes."""
    if example == "none":
        for path in EXAMPLE_ONLY:
            Path(path).unlink()
        for source, target in SKELETON.items():
            Path(source).replace(Path(target))
    shutil.rmtree("_skeleton")


keep_example("{{ cookiecutter.example }}")
