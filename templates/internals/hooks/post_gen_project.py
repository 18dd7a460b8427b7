"""For example=none, put the skeleton's files (an identity op) in place of the
example's and drop the example's own tests (src/<package>/<op>.py is one
template for every api and example). Keep the C++ handler only for
lowering=ffi: with stablehlo the project stays pure Python (no CMake, no
compiled module), so C++ and CMake files stay free of Jinja. Keep the chosen
accelerator workflow, if any."""

import runpy
import shutil
from pathlib import Path

# The files every project shares, which hooks/pre_gen_project.py staged, into place
# first (templates/shared_files.py in the kit), the chosen accelerator workflow among
# them: the steps below move or drop some.
land = runpy.run_path(".jax-ladder-shared/shared_files.py")["land"]
land(Path.cwd(), accelerator_ci="{{ cookiecutter.accelerator_ci }}")

package = Path("src/{{ cookiecutter.package_name }}")
op = "{{ cookiecutter.op_name }}"
skeleton = "{{ cookiecutter.example }}" == "none"
if skeleton:
    # The files to edit, as an identity op (the op and tests/op_spec.py are
    # templates for every example).
    Path("_skeleton/reference.py").replace(package / "reference.py")
    Path("_skeleton/op_cpu.cc").replace(Path(f"csrc/{op}_cpu.cc"))
    # The example's own tests: they test the tridiagonal product.
    for path in (f"tests/test_{op}.py", "tests/test_hijax.py", "tests/test_ffi_handler.py"):
        Path(path).unlink()
    # The example's measured plots (CPU, TPU).
    Path("docs/benchmark.svg").unlink(missing_ok=True)
    Path("docs/benchmark-tpu.svg").unlink(missing_ok=True)
shutil.rmtree("_skeleton")
if "{{ cookiecutter.lowering }}" == "ffi":
    # scikit-build-core's sdist holds every file .gitignore does not exclude.
    Path("MANIFEST.in").unlink()
    # Compiled wheels for PyPI: _cd/compiled.yml is the FFI rung's cd.yml (a
    # cibuildwheel job per platform), a plain file like every workflow.
    Path("_cd/compiled.yml").replace(Path(".github/workflows/cd.yml"))
else:
    shutil.rmtree("csrc")
    for path in ("CMakeLists.txt", "tests/test_ffi_handler.py", package / "ffi_target.py"):
        Path(path).unlink(missing_ok=True)
    (package / "_ffi.pyi").unlink()
shutil.rmtree("_cd")
if "{{ cookiecutter.api }}" == "hijax":
    Path("tests/test_hijax.py").unlink(missing_ok=True)
else:
    Path("tests/test_hijax_limits.py").unlink()


