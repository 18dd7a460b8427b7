"""Drop the CUDA handler (and the workflow that compiles it) unless it was asked for. CMakeLists.txt builds it only
when the file exists (and a CUDA compiler is found), and kernel_check.cc checks
the CUDA kernels' row arithmetic only when rms_norm_block.h exists, so C++ and
CMake files stay free of Jinja. Keep the chosen accelerator workflow, if any."""

import shutil
from pathlib import Path

if "{{ cookiecutter.cuda }}" != "yes":
    Path("csrc/rms_norm_cuda.cu").unlink(missing_ok=True)
    Path("csrc/rms_norm_block.h").unlink(missing_ok=True)
    Path("tests/test_cuda.py").unlink(missing_ok=True)
    Path(".github/workflows/cuda.yml").unlink(missing_ok=True)


def keep_accelerator_workflow(choice):
    """The accelerator_ci option: move _accelerator_ci/<choice>.yml to
    .github/workflows/accelerator.yml (for "none", nothing), then drop the
    folder. The workflows are plain files, so they stay free of Jinja."""
    if choice != "none":
        Path(f"_accelerator_ci/{choice}.yml").replace(Path(".github/workflows/accelerator.yml"))
    shutil.rmtree("_accelerator_ci")


keep_accelerator_workflow("{{ cookiecutter.accelerator_ci }}")
