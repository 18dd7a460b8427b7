from conftest import REPO, assert_lint_clean

KIT_SOURCES = ("src", "tests", "assets", "examples", "scripts/hardware-check", "noxfile.py")


def test_kit_sources_are_ruff_clean():
    assert_lint_clean(REPO, *KIT_SOURCES)
