"""Keep only the chosen backend: its helpers as src/<package>/backend.py, its
kernel as src/<package>/kernel.py and its test helpers as tests/target.py; the
chosen accelerator workflow, if any; and the worked example or the skeleton
(see keep_example)."""

import runpy
import shutil
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")

PACKAGE = Path("src/{{ cookiecutter.package_name }}")
# The worked example's own files: its tests, oracle, tuner and tuner's tests,
# and its measured benchmark plot.
# The skeleton (example=none) has none of them.
EXAMPLE_ONLY = [
    "tests/oracle.py",
    "tests/test_kernel.py",
    "tests/test_reference.py",
    "tests/test_composed.py",
    "tests/test_tune.py",
    "src/{{ cookiecutter.package_name }}/tune.py",
    "docs/benchmark.svg",
    "docs/benchmark-tpu.svg",
]
# Where the skeleton's files go (each replaces the example's).
SKELETON = {
    "_skeleton/reference.py": PACKAGE / "reference.py",
    "_skeleton/op.py": PACKAGE / "{{ cookiecutter.op_name }}.py",
    "_skeleton/op_spec.py": Path("tests/op_spec.py"),
    "_skeleton/test_kernel.py": Path("tests/test_kernel.py"),
}


def keep_backend(backend, example):
    """The backend option: its helpers as backend.py (which the example's
    kernel and the skeleton's share), its kernel (the example's, or the
    skeleton's) as kernel.py and its test helpers as tests/target.py; the plot
    measured on a TPU only with the TPU kernel."""
    if backend != "tpu" and example != "none":
        Path("docs/benchmark-tpu.svg").unlink()
    kernels = Path("_kernels") if example != "none" else Path("_skeleton/kernels")
    (Path("_backends") / f"{backend}.py").replace(PACKAGE / "backend.py")
    (kernels / f"{backend}.py").replace(PACKAGE / "kernel.py")
    (Path("_targets") / f"{backend}.py").replace(Path("tests/target.py"))
    for chosen_from in ("_backends", "_kernels", "_targets"):
        shutil.rmtree(chosen_from)


def keep_example(example):
    """The example option: "none" moves the skeleton's reference, op and
    declaration over the example's and deletes the example's own files;
    otherwise the skeleton goes."""
    if example == "none":
        for path in EXAMPLE_ONLY:
            Path(path).unlink()
        for source, target in SKELETON.items():
            Path(source).replace(target)
        # The shipped entries are the example's, measured for its shapes.
        (PACKAGE / "block_table.json").write_text("{}\n")
    shutil.rmtree("_skeleton")


keep_backend("{{ cookiecutter.backend }}", "{{ cookiecutter.example }}")
keep_example("{{ cookiecutter.example }}")
