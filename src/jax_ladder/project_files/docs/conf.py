"""Sphinx configuration: the pages are Markdown, read by MyST.

Sphinx with MyST because JAX's own documentation is built with them: the same
tool and the same Markdown as the project this package extends, and the API
page comes from the docstrings (autodoc). Build with `nox -s docs`, or:

    sphinx-build -W --keep-going -b html docs docs/_build/html

(-W: any warning fails the build, such as a README link that leads nowhere or
a docstring that does not render.)
"""

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# autodoc imports the package from src/ rather than from an installed copy:
# the docs need the package's dependencies, not a build of it.
sys.path.insert(0, str(ROOT / "src"))

# Name, version and authors are written once, in pyproject.toml.
_metadata = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
project = _metadata["name"]
release = version = _metadata["version"]
author = ", ".join(person["name"] for person in _metadata["authors"])
copyright = author  # shown in the page footer

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]

# Anchors for headings down to ###, so that a link such as [Run](#run) in the
# README, which index.md includes, works here as it does on GitHub.
myst_heading_anchors = 3

# The API page lists the package's __all__ in its order.
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = project

# A package with a compiled extension (_ffi, typed by its _ffi.pyi) imports it,
# and autodoc imports the package: a mock stands in for the extension, so that
# the docs build without a C++ compiler or a build of the package. (The mock
# holds no handlers: importing registers none, and nothing in the docs calls them.)
autodoc_mock_imports = [f"{stub.parent.name}._ffi" for stub in (ROOT / "src").glob("*/_ffi.pyi")]
