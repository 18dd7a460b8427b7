"""The kit's documentation site (docs/, built by `nox -s docs`): a source page's
path on it, and its address where the package metadata records one.

The address has one home, `Documentation` under `[project.urls]` in the kit's
pyproject.toml, which the installed package's metadata carries; without it the
site's pages are named by their path on the site.
"""

from __future__ import annotations

import importlib.metadata


def base_url() -> str | None:
    """The site's address from the installed jax-ladder's `Project-URL: Documentation`."""
    try:
        urls: list[str] = importlib.metadata.metadata("jax-ladder").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/") + "/"
    return None


def page(source: str) -> str:
    """The site's page built from `source` (a path in the repository under docs/):
    docs/rungs/2-transforms.md is rungs/2-transforms.html."""
    assert source.startswith("docs/"), source
    assert source.endswith(".md"), source
    return source.removeprefix("docs/").removesuffix(".md") + ".html"


def page_url(source: str) -> str | None:
    """The page's address, where the site's address is known."""
    base = base_url()
    return None if base is None else base + page(source)


def describe(source: str) -> str:
    """How to name the page to a reader: its address, else its path on the site
    and its source in the repository."""
    return page_url(source) or f"{page(source)} on the jax-ladder site ({source})"
