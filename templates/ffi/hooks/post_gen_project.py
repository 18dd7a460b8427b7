"""Drop the CUDA handler unless it was asked for. CMakeLists.txt builds it only
when the file exists (and a CUDA compiler is found), and kernel_check.cc checks
the CUDA kernels' row arithmetic only when rms_norm_block.h exists, so C++ and
CMake files stay free of Jinja."""

from pathlib import Path

if "{{ cookiecutter.cuda }}" != "yes":
    Path("csrc/rms_norm_cuda.cu").unlink(missing_ok=True)
    Path("csrc/rms_norm_block.h").unlink(missing_ok=True)
    Path("tests/test_cuda.py").unlink(missing_ok=True)
