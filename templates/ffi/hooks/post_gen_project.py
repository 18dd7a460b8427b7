"""Drop the CUDA handler unless it was asked for. CMakeLists.txt builds it only
when the file exists (and a CUDA compiler is found), so C++ and CMake files
stay free of Jinja."""

from pathlib import Path

if "{{ cookiecutter.cuda }}" != "yes":
    Path("csrc/rms_norm_cuda.cu").unlink(missing_ok=True)
    Path("tests/test_cuda.py").unlink(missing_ok=True)
