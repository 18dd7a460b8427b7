"""Reject names that would break the generated project (for plain cookiecutter
users; `jax-ladder new` checks the same before rendering anything)."""

import keyword
import sys

name = "{{ cookiecutter.package_name }}"
shadowed = {"jax", "jaxlib", "numpy", "pytest", "scipy", "tests"}
if (
    not name.isidentifier()
    or keyword.iskeyword(name)
    or name in shadowed
    or name in sys.stdlib_module_names
):
    sys.exit(
        f"error: package name {name!r} is not a usable Python package name "
        "(not an identifier, a keyword, or it shadows a module); choose another project_name"
    )
