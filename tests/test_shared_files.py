"""What every generated project shares lives once, in the kit's package: the
conformance engine (src/jax_ladder/opcheck/) and the repository's plumbing
(src/jax_ladder/project_files/). templates/shared_files.py writes them into
each project as it is generated. A template may keep its own file at a shared
path only where OVERRIDES says why, and then only add lines to the shared
text; it may do without a shared file only where its cookiecutter.json's
`_shared_skip` lists it, for the reason SKIPPED gives."""

import difflib
import hashlib
import json
import os
import re
import runpy
import subprocess
import sys

import pytest
from conftest import REPO

from jax_ladder import __version__
from jax_ladder.rungs import available
from jax_ladder.scaffold import scaffold

TEMPLATES = {r.template: REPO / "templates" / r.template for r in available()}
P = "{{cookiecutter.project_name}}"  # the generated project's folder in a template
SHARED = runpy.run_path(str(REPO / "templates" / "shared_files.py"))
PACKAGE = REPO / "src" / "jax_ladder"

# (template, path in a project): why that template's own copy adds lines to
# the shared text. It may only add: every line of the shared file stays, in order.
OVERRIDES = {
    ("ffi", "_accelerator_ci/gpu.yml"): (
        "the GPU run also builds the CUDA handler (so it needs nvcc, and the build must "
        "include it) and needs cmake for the sanitizer test"
    ),
    ("ffi", ".github/workflows/cd.yml"): (
        "compiled wheels: a cibuildwheel job per platform, whose wheels replace the one "
        "the shared build job makes from the sdist (a plain linux_x86_64 wheel PyPI refuses)"
    ),
}
# (template, path in a project): why that template's projects do without a shared file.
SKIPPED = {
    ("ffi", "MANIFEST.in"): (
        "MANIFEST.in is setuptools'; scikit-build-core's sdist holds every file "
        ".gitignore does not exclude"
    ),
    ("ffi", "_accelerator_ci/tpu.yml"): (
        "its handlers are for the CPU and CUDA: a TPU has no code of this project to run"
    ),
    ("export", "benchmarks/timing.py"): (
        "its benchmark times rounds of calls of a deserialized artifact against jit "
        "(the median over rounds of each round's ratio), not single calls"
    ),
    ("memory-and-sharding", "benchmarks/timing.py"): (
        "its benchmark times a training step that donates its state, each call fed the "
        "last one's output, which a timer of fixed arguments cannot do"
    ),
}


def shared_sources():
    """Each shared file's path in a project -> its text in the package, as written."""
    sources = {target: PACKAGE / "opcheck" / name for name, target in SHARED["ENGINE"].items()}
    root = PACKAGE / "project_files"
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(root).as_posix().removesuffix(".jinja")
            sources[SHARED["RENAMED"].get(relative, relative)] = path
    return sources


def added_lines_only(common: str, copy: str) -> bool:
    matcher = difflib.SequenceMatcher(None, common.splitlines(), copy.splitlines(), autojunk=False)
    return all(op in ("equal", "insert") for op, *_ in matcher.get_opcodes())


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_overrides_or_skips_a_shared_file_only_as_declared(template):
    skip = json.loads((TEMPLATES[template] / "cookiecutter.json").read_text()).get(
        "_shared_skip", []
    )
    assert sorted(skip) == sorted(path for t, path in SKIPPED if t == template)
    for target, source in shared_sources().items():
        own = TEMPLATES[template] / P / target
        if (template, target) in OVERRIDES:
            text = own.read_text()
            assert text != source.read_text(), f"{template}'s {target} no longer differs"
            assert added_lines_only(source.read_text(), text), f"{template}'s {target}"
        else:
            assert not own.exists(), f"{template} has its own {target}: declare it in OVERRIDES"


def test_every_declared_exception_names_a_template_and_a_shared_file():
    for template, target in [*OVERRIDES, *SKIPPED]:
        assert template in TEMPLATES, template
        assert target in shared_sources(), target


def test_every_module_of_the_conformance_package_reaches_a_project():
    # tests/conformance/ in a project is the package's every module: one left
    # out of ENGINE would fail there at import, not here.
    modules = sorted(p.name for p in (PACKAGE / "opcheck" / "conformance").glob("*.py"))
    assert sorted(SHARED["CONFORMANCE"]) == modules


def test_no_module_of_the_opcheck_engine_outgrows_600_lines():
    # Issue 60: one module per part (the declaration, the oracles, HLO reading,
    # each family of cells, the comparison, the reports, the plugin, the
    # shrinking and its repro script), each short enough to read; a part that
    # grows past this is split, not the limit raised. The conformance package
    # and the kit's own modules beside it alike.
    opcheck = PACKAGE / "opcheck"
    modules = sorted(opcheck.rglob("*.py"))
    assert opcheck / "conformance" / "declaration.py" in modules
    for path in modules:
        lines = len(path.read_text().splitlines())
        assert lines <= 600, f"{path.relative_to(opcheck)}: {lines} lines"


def test_the_engine_copied_into_projects_has_no_jinja_markers():
    # Every project's test_no_jinja_left_in_generated_files holds its files to
    # none; an escaped brace in an f-string ("sizes={{...}}") failed all of
    # them. Here it fails at once, naming the line.
    found = [
        f"{name}:{number}: {line.strip()}"
        for name in SHARED["ENGINE"]
        for number, line in enumerate((PACKAGE / "opcheck" / name).read_text().splitlines(), 1)
        if re.search(r"\{\{|\}\}|\{%|%\}|\{#", line)
    ]
    assert found == []


def test_the_shared_files_are_found_in_a_checkout_and_in_an_installed_wheel(tmp_path):
    assert SHARED["package_dir"](REPO / "templates") == PACKAGE
    # A wheel: jax_ladder/templates/ beside jax_ladder/opcheck/ (CMakeLists.txt).
    wheel = tmp_path / "jax_ladder"
    (wheel / "opcheck" / "conformance").mkdir(parents=True)
    (wheel / "opcheck" / "conformance" / "__init__.py").write_text("")
    (wheel / "templates").mkdir()
    assert SHARED["package_dir"](wheel / "templates") == wheel
    with pytest.raises(FileNotFoundError, match="no jax_ladder package"):
        SHARED["package_dir"](tmp_path / "elsewhere" / "templates")


def test_a_project_gets_every_shared_file_stamped_with_flat_imports(tmp_path):
    rung = next(r for r in available() if r.template == "ffi")
    project = scaffold(rung, tmp_path, {})
    assert not (project / SHARED["STAGING"]).exists()
    for target in shared_sources():
        path = project / target
        if target.startswith("_accelerator_ci/"):
            # The post-generation hook keeps the one chosen (accelerator_ci), as
            # .github/workflows/accelerator.yml; the default chooses none.
            assert not path.parent.exists(), target
            continue
        if ("ffi", target) in SKIPPED:
            assert not path.exists(), target
            continue
        text = path.read_text()
        if ("ffi", target) in OVERRIDES:  # the template's own file won
            assert text == (TEMPLATES["ffi"] / P / target).read_text(), target
        elif target != "LICENSE":
            first = text.splitlines()[1 if text.startswith("#!") else 0]
            assert f"jax-ladder {__version__}:" in first, target
        # The engine's imports of its sibling modules made flat; the
        # conformance package's of its own modules stay relative.
        assert "from .." not in text, target
        if not target.startswith("tests/conformance/"):
            assert "from ." not in text, target
        assert "{{ cookiecutter" not in text, target  # the Jinja files rendered
        assert "{%" not in text, target


def test_every_template_runs_the_one_pre_generation_hook():
    # cookiecutter runs a template's own hooks/ only: each is a link to the
    # one hook that finds the kit (name rules, shared files).
    for path in TEMPLATES.values():
        hook = path / "hooks/pre_gen_project.py"
        assert hook.is_symlink(), hook
        assert hook.resolve() == REPO / "templates/pre_gen_project.py", hook


def test_no_template_file_is_a_copy_of_another():
    # Where two templates need the same file (internals' compiled-wheel cd.yml
    # is ffi's, memory-and-sharding's hlo.py is custom-partitioning's), one is
    # a symbolic link to the other: no copy to keep equal, so no drift.
    seen = {}
    for path in sorted((REPO / "templates").rglob("*")):
        if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
            continue
        data = path.read_bytes()
        if len(data) < 200:  # an empty __init__.py, a py.typed marker
            continue
        other = seen.setdefault(hashlib.sha256(data).hexdigest(), path)
        assert other == path, f"{path} is a copy of {other}: make one a link to the other"


def test_the_shared_conftest_applies_a_projects_jax_default_device(tmp_path):
    # ffi's tests check its CPU handler even where a GPU is the default:
    # its pyproject.toml says jax_default_device = "cpu", which the shared
    # conftest reads (no template keeps its own conftest for it).
    rung = next(r for r in available() if r.template == "ffi")
    project = scaffold(rung, tmp_path, {})
    probe = project / "tests" / "test_probe.py"
    probe.write_text(
        "import jax\n\n\ndef test_default_device():\n"
        '    assert jax.config.jax_default_device == "cpu"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_worst_oracle_error_line_prints_under_xdist(tmp_path):
    # With -n, the workers compare and the controller prints: each worker
    # hands its worst error to it (the line was missing under -n 2).
    rung = next(r for r in available() if r.template == "custom-vjp")
    project = scaffold(rung, tmp_path, {})
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-m", "quick"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(
        r"^oracle: worst error \S+ \(\S+% of tolerance\) in tests/", result.stdout, re.M
    ), result.stdout[-3000:]
