"""Sphinx configuration for the kit's site: Markdown read by MyST, the Furo theme,
the same toolchain as the generated projects' docs. Build with `nox -s docs`, or:

    sphinx-build -W --keep-going -b html docs docs/_build/html

_ext/jax_ladder_pages.py writes docs/_generated/ (git-ignored) when the build starts,
from the registry, the recommend table, the templates, the examples, the CLI's parser
and CHANGELOG.md: the site holds no copy of a fact.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's jax_ladder, installed or not
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from jax_ladder_pages import REPOSITORY  # noqa: E402  (pyproject.toml's [project.urls])

from jax_ladder import __version__  # noqa: E402

project = "jax-ladder"
release = version = __version__
author = copyright = "The jax-ladder developers"

extensions = ["myst_parser", "jax_ladder_pages"]
source_suffix = {".md": "markdown"}
# Parts of index.md and tutorial.md (included), not pages of their own.
exclude_patterns = ["_build", "_ext", "_generated/install*.md", "_generated/ladder.md"]
# Anchors for headings down to ###, so links such as [Run](#run) work as on GitHub.
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"jax-ladder {version}"
# A page with no icon makes browsers ask for /favicon.ico, which the site lacks.
html_favicon = "favicon.svg"
html_static_path = ["_static"]
html_css_files = ["site.css"]
# The header of every page: where the kit lives and how to get it.
html_theme_options = {
    "announcement": (
        f"<code>pip install git+{REPOSITORY}</code> &middot; "
        f'<a href="{REPOSITORY}">source and issues</a>'
    ),
    "footer_icons": [{"name": "Repository", "url": REPOSITORY, "html": "Repository", "class": ""}],
}
