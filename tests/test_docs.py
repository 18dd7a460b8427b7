"""Every generated project has a docs/ folder (Sphinx + MyST + furo): the README,
the API from the docstrings, and the rung's reference page. These tests keep
each template's copy of that page equal to the kit's, and build a baked
project's docs the way its `nox -s docs` does, warnings as errors."""

import ast
import html
import itertools
import re
import subprocess
import sys
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES

import mdformat
import pytest
from conftest import REPO
from markdown_it import MarkdownIt

from jax_ladder.recommend import page_path
from jax_ladder.rungs import available, by_name
from jax_ladder.scaffold import scaffold

P = "{{cookiecutter.project_name}}"  # the generated project's folder in a template
KIT_ONLY = "\n## In the kit\n"  # the page's last section: the kit's commands, not the project's


def rung_page_copy_path(rung):
    return REPO / "templates" / rung.template / P / "docs" / "when-to-use.md"


def rung_page_copy(rung) -> str:
    """What a template's docs/when-to-use.md must be: the kit's page for the
    rung without its last section (about the kit, not this project), in the
    form the project's own mdformat hook (pre-commit) leaves Markdown."""
    page = (REPO / page_path(rung)).read_text()
    assert KIT_ONLY in page, page_path(rung)
    text = page.split(KIT_ONLY)[0].rstrip("\n") + "\n"
    shared = REPO / "src" / "jax_ladder" / "project_files"  # every project's (shared_files.py)
    options = tomllib.loads((shared / ".mdformat.toml").read_text())
    return mdformat.text(text, options=options, extensions={"gfm", "tables"})


@pytest.mark.parametrize("rung", available(), ids=lambda r: r.name)
def test_each_template_carries_the_kit_page_of_its_rung(rung):
    copy = rung_page_copy_path(rung)
    assert copy.read_text() == rung_page_copy(rung), (
        f"{copy.relative_to(REPO)} differs from {page_path(rung)}, its source: "
        "`python tests/test_docs.py` rewrites the copies"
    )


def test_read_the_docs_config_is_valid():
    # One file, which every project gets (templates/shared_files.py).
    config = REPO / "src" / "jax_ladder" / "project_files" / ".readthedocs.yaml"
    command = ["-m", "check_jsonschema", "--builtin-schema", "vendor.readthedocs", str(config)]
    result = subprocess.run([sys.executable, *command], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def plain(text: str) -> str:
    """text without inline markup characters (`code`, *emphasis*), with
    Sphinx's curly apostrophes straightened and whitespace collapsed: what a
    docstring and the page it renders into have in common."""
    text = text.replace("\u2019", "'").replace("`", "").replace("*", "")
    return " ".join(text.split())


def page_text(path) -> str:
    """An HTML page's text: tags dropped, entities decoded, made plain."""
    return plain(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())))


def docstring_paragraphs(module_path, function) -> list[str]:
    """The paragraphs of a function's docstring, read from the source (the FFI
    package cannot be imported here: its extension is not built)."""
    tree = ast.parse(module_path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    docstring = ast.get_docstring(node)
    assert docstring, f"{module_path}: {function} has no docstring"
    return [plain(p) for p in docstring.split("\n\n")]


def readme_headings(path) -> list[str]:
    """The text of a Markdown file's level 1 and 2 headings."""
    tokens = MarkdownIt().parse(path.read_text())
    return [
        plain(inline.content)
        for heading, inline in itertools.pairwise(tokens)
        if heading.type == "heading_open" and heading.tag in ("h1", "h2")
    ]


# Each rung's op: its module under src/<pkg>/ and its public function. Every
# default project's docs are built: each template has its own docstrings, and
# the FFI rung's docs must build without the C++ (conf.py mocks the extension).
OPS = {
    "memory-and-sharding": ("sharded_step.py", "train_step"),
    "custom-vjp": ("pairwise_distances.py", "pairwise_distances"),
    "export": ("artifact.py", "export_model"),
    "custom-partitioning": ("sharded_top_k.py", "sharded_top_k"),
    "pallas": ("fused_matmul.py", "fused_matmul"),
    "ffi": ("rms_norm.py", "rms_norm"),
    "internals": ("tridiagonal_matvec.py", "tridiagonal_matvec"),
}


def test_every_template_names_its_op():
    assert set(OPS) == {r.name for r in available()}


@pytest.mark.parametrize("name", OPS)
def test_default_project_docs_build_with_warnings_as_errors(tmp_path, name):
    module, op = OPS[name]
    rung = by_name(name)
    project = scaffold(rung, tmp_path, {})
    package = next((project / "src").iterdir())
    compiled = [p for p in package.iterdir() if p.name.endswith(tuple(EXTENSION_SUFFIXES))]
    assert not compiled, "the docs must build without the compiled extension"
    command = ["-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html"]
    result = subprocess.run(
        [sys.executable, *command], cwd=project, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    built = project / "docs" / "_build" / "html"

    # autodoc documented the op (an object of the Python domain, not its
    # reStructuredText shown as Markdown text) with its docstring.
    assert f'id="{package.name}.{op}"' in (built / "api.html").read_text()
    api = page_text(built / "api.html")
    for paragraph in docstring_paragraphs(package / module, op):
        assert paragraph in api, f"api.html lacks {op}'s docstring paragraph {paragraph!r}"
    # The README, included: every title and section heading.
    index = page_text(built / "index.html")
    for heading in readme_headings(project / "README.md"):
        assert heading in index, heading
    # The rung's page: its first section, without the kit's own section.
    rung_page = page_text(built / "when-to-use.html")
    assert "When not to use" in rung_page
    assert "jax-ladder new" not in rung_page


if __name__ == "__main__":
    # After editing a page in docs/rungs/: rewrite every template's copy.
    for rung in available():
        rung_page_copy_path(rung).write_text(rung_page_copy(rung))


# The kit has no release on the package index yet (issue 48: the README's first
# command, `pip install jax-ladder`, found nothing there). Every page leads with
# the install that works today, from the repository; when a release is
# published, name the index on the pages and in this test together.
INDEX_INSTALL = re.compile(r"pip install jax-ladder\b")
PAGES = ["README.md", "docs/conf.py", "docs/_ext/jax_ladder_pages.py", "docs/**/*.md"]


def test_no_page_sends_a_user_to_the_package_index_before_a_release():
    pages = [p for pattern in PAGES for p in REPO.glob(pattern) if "_generated" not in p.parts]
    found = [
        f"{page.relative_to(REPO)}:{n}"
        for page in pages
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if INDEX_INSTALL.search(line)
    ]
    assert found == []


def test_the_readme_leads_with_the_install_from_the_repository():
    repository = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    install = (REPO / "README.md").read_text().split("## Install", 1)[1]
    first = next(line for line in install.splitlines() if "pip install" in line)
    assert first.split("#")[0].split() == ["pip", "install", f"git+{repository['Repository']}"]
