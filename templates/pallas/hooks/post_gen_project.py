"""Keep only the chosen backend: its kernel as src/<package>/kernel.py and its
test helpers as tests/target.py."""

import shutil
from pathlib import Path

backend = "{{ cookiecutter.backend }}"
(Path("_kernels") / f"{backend}.py").replace(Path("src/{{ cookiecutter.package_name }}/kernel.py"))
(Path("_targets") / f"{backend}.py").replace(Path("tests/target.py"))
shutil.rmtree("_kernels")
shutil.rmtree("_targets")
