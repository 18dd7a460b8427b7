from conftest import REPO, assert_lint_clean


def test_kit_sources_are_ruff_clean():
    assert_lint_clean(REPO, "src", "tests", "assets", "examples", "scripts/hardware-check")
