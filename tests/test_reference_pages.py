"""docs/rungs/: one page per registry rung, with the required sections, linked
from the index, pointed to by `recommend`, naming only JAX APIs that exist."""

import re
import subprocess
import sys

import pytest
from conftest import REPO, run_cli

from jax_ladder import recommend as rec
from jax_ladder import site
from jax_ladder.recommend.check import witness
from jax_ladder.rungs import LADDER, docs_dir
from jax_ladder.versions import JAX_SPEC

PAGES = REPO / "docs" / "rungs"
HEADINGS = [
    "## When to use",
    "## When not to use",
    "## Checklist before climbing",
    "## Pitfalls",
    "## API changes in the supported JAX versions",
]
CHECKLIST = [
    "**Simpler options rejected:**",
    "**Backends and portability:**",
    "**Testing plan:**",
    "**The case:**",
]


def page(rung):
    return REPO / rec.page_path(rung)


@pytest.mark.parametrize("rung", LADDER, ids=lambda r: r.name)
def test_every_rung_has_a_page_with_the_required_sections(rung):
    path = page(rung)
    assert path.is_file(), f"missing {path.relative_to(REPO)}"
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0].startswith(f"# {rung.step}. {rung.name}"), lines[0]
    missing = [h for h in HEADINGS if h not in lines]
    assert not missing, f"{rung.name}: missing headings {missing}"
    positions = [lines.index(h) for h in HEADINGS]
    assert positions == sorted(positions), "headings out of order"
    checklist = text.split("## Checklist before climbing")[1].split("\n## ")[0]
    for item in CHECKLIST:
        assert item in checklist, f"{rung.name}: checklist lacks {item}"
    assert f"jax{JAX_SPEC}" in text.split("## API changes in the supported JAX versions")[1]
    assert 50 <= len(lines) <= 130, f"{rung.name}: {len(lines)} lines"
    if rung.template:
        assert f"jax-ladder new {rung.name}" in text


def test_index_links_every_page_and_nothing_else():
    index = (PAGES / "README.md").read_text()
    linked = set(re.findall(r"\]\(([^)]+\.md)\)", index))
    expected = {page(r).name for r in LADDER}
    assert linked == expected
    on_disk = {p.name for p in PAGES.glob("*.md")} - {"README.md"}
    assert on_disk == expected


def test_recommend_points_at_existing_pages():
    for rule in rec.RULES:
        answers = witness(rule)
        assert (REPO / rec.recommend(answers).page).is_file(), rule.id


# Names a page mentions as gone, deprecated or in some versions only, on purpose.
GONE = {
    "jax.extend.ffi",
    "jax.experimental.export",
    "jax.experimental.host_callback",
    "jax.experimental.enable_x64",
    "jax.lax.psend",
    "jax.lax.precv",
    "jax.core.pytype_aval_mappings",
    "jax.interpreters.pxla.thread_resources",
    "jax.device_put_replicated",
    "jax.device_put_sharded",
    # In part of the window only (the page says which versions have it).
    "jax.custom_remat",
}


def test_pages_name_only_apis_that_exist():
    names = set()
    for path in PAGES.glob("*.md"):
        for code in re.findall(r"`([^`]+)`", path.read_text()):
            names.update(re.findall(r"\bjax(?:\.\w+)+", code))
    names -= GONE
    script = f"""
import importlib, json, warnings
warnings.simplefilter("ignore")
missing = []
for name in {sorted(names)!r}:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            missing.append(name)
        break
    else:
        missing.append(name)
print(json.dumps(missing))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_gone_names_are_really_gone():
    script = """
import importlib, warnings
warnings.simplefilter("ignore")
import jax
for name, attr in [("jax.extend", "ffi"), ("jax.experimental", "enable_x64"),
                   ("jax", "device_put_replicated"), ("jax", "device_put_sharded")]:
    assert not hasattr(importlib.import_module(name), attr), name
for module in ("jax.extend.ffi", "jax.experimental.export", "jax.experimental.host_callback"):
    try:
        importlib.import_module(module)
    except ImportError:
        pass
    else:
        raise AssertionError(module)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_installed_kit_ships_the_pages_and_recommend_points_to_them(tmp_path):
    for rung in LADDER:
        assert (docs_dir().parent / rec.page_path(rung)).is_file(), rung.name
    result = run_cli("recommend", "--no-input", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("Reference: ")]
    # The line names one rung's page as site.describe does (its address, where
    # the metadata records the site's), and the installed kit ships its source.
    (source,) = [
        rec.page_path(rung)
        for rung in LADDER
        if line == f"Reference: {site.describe(rec.page_path(rung))}"
    ]
    assert (docs_dir().parent / source).is_file(), line
