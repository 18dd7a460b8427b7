"""Put the op's C++ rows in place: _kernels/<example>_kernels.h becomes
csrc/<op_name>_kernels.h (CMake finds it by that name), so C++ stays free of
Jinja. The skeleton (example=none) drops what only the worked example needs.
Drop the CUDA handler (and the workflow that compiles it) unless it was asked
for: CMakeLists.txt builds it only when the file exists (and a CUDA compiler
is found), and kernel_check.cc checks the CUDA kernels' rows only when
cuda_block.h exists. The shared files and the chosen accelerator workflow land first."""

import runpy
import shutil
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")

EXAMPLE = "{{ cookiecutter.example }}"
OP = "{{ cookiecutter.op_name }}"

Path(f"_kernels/{EXAMPLE}_kernels.h").replace(Path(f"csrc/{OP}_kernels.h"))
shutil.rmtree("_kernels")

if EXAMPLE == "none":
    # The example's own tests, and the optional speed-up (see README.md).
    Path(f"tests/test_{OP}.py").unlink(missing_ok=True)
    Path("csrc/huge_pages.h").unlink(missing_ok=True)
    Path("docs/benchmark.svg").unlink(missing_ok=True)  # the example's measured plot

if "{{ cookiecutter.cuda }}" != "yes":
    Path("csrc/cuda_handlers.cu").unlink(missing_ok=True)
    Path("csrc/cuda_block.h").unlink(missing_ok=True)
    Path("tests/test_cuda.py").unlink(missing_ok=True)
    Path(".github/workflows/cuda.yml").unlink(missing_ok=True)


