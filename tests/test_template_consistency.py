"""Generated projects stand alone, so some files are copied into every template
on purpose. The lists below declare them; these tests keep the copies from
drifting apart, and make every difference say why."""

import difflib

import pytest
from conftest import REPO

from jax_ladder.rungs import available

TEMPLATES = {r.template: REPO / "templates" / r.template for r in available()}
P = "{{cookiecutter.project_name}}"  # the generated project's folder in a template

# Files identical in every template (paths inside templates/<rung>/), except
# where ADDITIONS lets one template add lines.
IDENTICAL = [
    "hooks/pre_gen_project.py",
    f"{P}/.pre-commit-config.yaml",
    f"{P}/.github/workflows/ci.yml",
    f"{P}/.gitignore",
    f"{P}/tests/conftest.py",
    # The devices a sharding test's mesh runs on (benchmarks import it too).
    f"{P}/tests/devices.py",
    # The comparison with the float64 oracles, in ulps; each project states its
    # tolerances next to its oracle (tests/oracle.py).
    f"{P}/tests/compare.py",
    # The conformance matrix: one module, its test driver and the README table's
    # writer; each project declares its own op in tests/op_spec.py.
    f"{P}/tests/conformance.py",
    f"{P}/tests/test_conformance.py",
    f"{P}/tests/support_table.py",
    # The benchmark's drawing (matplotlib, no JAX) and its read-back test; each
    # project's bench.py decides what to measure and draw.
    f"{P}/benchmarks/plot.py",
    f"{P}/tests/test_bench_plot.py",
    f"{P}/.github/dependabot.yml",
    f"{P}/.mdformat.toml",
    f"{P}/noxfile.py",
    f"{P}/_accelerator_ci/gpu.yml",
    f"{P}/_accelerator_ci/tpu.yml",
    f"{P}/LICENSE",
    f"{P}/.readthedocs.yaml",
    f"{P}/docs/conf.py",
    f"{P}/docs/index.md",
    f"{P}/docs/api.md",
    f"{P}/.github/workflows/cd.yml",
    f"{P}/MANIFEST.in",
]
# (template, file): why that template's copy adds lines to the common text.
# It may only add: every line of the common copy stays, in order.
ADDITIONS = {
    ("export", f"{P}/.github/workflows/ci.yml"): (
        "CI also exports the artifact and serves it through the package's command line"
    ),
    ("ffi", f"{P}/tests/conftest.py"): (
        "the CPU as the default device: the tests check the CPU handler even where a "
        "GPU is present (mesh_devices follows it)"
    ),
    ("ffi", f"{P}/_accelerator_ci/gpu.yml"): (
        "the GPU run also builds the CUDA handler (so it needs nvcc, and the build must "
        "include it) and needs cmake for the sanitizer test"
    ),
    ("ffi", f"{P}/docs/conf.py"): (
        "a mock of the compiled extension, so that the docs build without the C++"
    ),
    ("internals", f"{P}/docs/conf.py"): (
        "the same mock as ffi's, for lowering=ffi (the package imports its compiled "
        "extension); with stablehlo there is no such module and the mock is never used"
    ),
    ("ffi", f"{P}/.github/workflows/cd.yml"): (
        "compiled wheels: a cibuildwheel job per platform, whose wheels replace the one "
        "the shared build job makes from the sdist (a plain linux_x86_64 wheel PyPI refuses)"
    ),
}
# (template, file): why that template has no copy of a listed file at all.
ABSENT = {
    ("ffi", f"{P}/MANIFEST.in"): (
        "MANIFEST.in is setuptools'; scikit-build-core's sdist holds every file "
        ".gitignore does not exclude"
    ),
    ("ffi", f"{P}/_accelerator_ci/tpu.yml"): (
        "its handlers are for the CPU and CUDA: a TPU has no code of this project to run"
    ),
}
# Files that are each template's own (its oracle, its fixtures) around shared
# top-level definitions, which must be identical in every template.
SHARED_DEFINITIONS = {
    f"{P}/tests/conftest.py": (
        "rng",
        "QUICK_MARKER",
        "QUICK_CELLS",
        "pytest_collection_modifyitems",
        "pytest_terminal_summary",
        "pytest_report_header",
        "REQUIRED_PLATFORM",
        "pytest_configure",
        "fail_if_skipped",
        "pytest_runtest_makereport",
        "pytest_make_collect_report",
    ),
    "hooks/post_gen_project.py": ("keep_accelerator_workflow",),
}

# (template, file) that is a copy of another template's file under another
# name: internals' post-generation hook installs its compiled-wheel cd.yml for
# lowering=ffi, which must stay ffi's.
COPIES = {("internals", f"{P}/_cd/compiled.yml"): ("ffi", f"{P}/.github/workflows/cd.yml")}


def definition_source(text: str, name: str) -> str:
    """A top-level `def name(` or `name = ` with its decorators, up to the next
    top-level statement (textual: template files may hold Jinja)."""
    lines = text.splitlines()
    heads = (f"def {name}(", f"{name} =")
    start = next(i for i, line in enumerate(lines) if line.startswith(heads))
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()),
        len(lines),
    )
    return "\n".join(lines[start:end]).strip()


def added_lines_only(common: str, copy: str) -> bool:
    matcher = difflib.SequenceMatcher(None, common.splitlines(), copy.splitlines(), autojunk=False)
    return all(op in ("equal", "insert") for op, *_ in matcher.get_opcodes())


def test_every_declared_exception_names_a_template_and_a_listed_file():
    for template, relative in [*ADDITIONS, *ABSENT]:
        assert template in TEMPLATES, (template, relative)
        assert relative in IDENTICAL, (template, relative)


@pytest.mark.parametrize("relative", IDENTICAL)
def test_shared_file_is_identical_except_for_declared_additions(relative):
    absent = {name for name in TEMPLATES if (name, relative) in ABSENT}
    for name in absent:
        assert not (TEMPLATES[name] / relative).exists(), f"{name} has {relative}: drop ABSENT"
    texts = {
        name: (path / relative).read_text()
        for name, path in TEMPLATES.items()
        if name not in absent
    }
    plain = {name: text for name, text in texts.items() if (name, relative) not in ADDITIONS}
    assert len(set(plain.values())) == 1, f"{relative} differs between {sorted(plain)}"
    common = next(iter(plain.values()))
    for name, text in texts.items():
        if (name, relative) in ADDITIONS:
            assert text != common, f"{name}'s {relative} no longer differs: drop its exception"
            assert added_lines_only(common, text), f"{name}'s {relative} changes shared lines"


@pytest.mark.parametrize(
    ("relative", "name"),
    [(relative, name) for relative, names in SHARED_DEFINITIONS.items() for name in names],
)
def test_shared_definitions_are_identical(relative, name):
    sources = {
        template: definition_source((path / relative).read_text(), name)
        for template, path in TEMPLATES.items()
    }
    assert len(set(sources.values())) == 1, sorted(sources)


@pytest.mark.parametrize(("copy", "original"), COPIES.items(), ids=lambda c: "/".join(c))
def test_a_copied_file_is_identical_to_its_original(copy, original):
    (copy_template, copy_path), (template, path) = copy, original
    copied = (TEMPLATES[copy_template] / copy_path).read_text()
    assert copied == (TEMPLATES[template] / path).read_text(), f"{copy} differs from {original}"
