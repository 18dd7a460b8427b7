"""`jax-ladder locate`: ranking on a made-up package, the installed JAX, a fake
JAX checkout for --repo, and the errors."""

import textwrap

import pytest
from conftest import assert_usage_error, run_cli

from jax_ladder import locate
from jax_ladder.options import UsageError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def fake_source(tmp_path):
    base = tmp_path / "site"
    write(base / "pkg" / "_src" / "foo_bar.py", '"""Implementation."""\n')
    write(
        base / "pkg" / "_src" / "impl.py",
        """\
        from pkg._src import core

        foo_bar_p = core.Primitive("foo_bar")


        def foo_bar(x):
            return foo_bar_p.bind(x)


        def foo_bar_batching_rule(args, dims):
            return args, dims


        class Thing:
            def foo_bar(self):
                pass
        """,
    )
    write(base / "pkg" / "api.py", "from pkg._src.impl import foo_bar as foo_bar\n")
    write(base / "pkg" / "notes.py", "# foo_bar is mentioned here\n# and foo bar again\n")
    return locate.Root("pkg (fake)", base, base / "pkg", "source")


def test_ranking_module_then_definitions_then_text(fake_source):
    hits = locate.locate(locate.Query.parse("foo_bar"), [fake_source])
    kinds = [(h.kind, h.shown) for h in hits]
    assert kinds == [
        ("module", "pkg/_src/foo_bar.py"),
        ("def", "pkg/_src/impl.py"),
        ("primitive", "pkg/_src/impl.py"),
        ("public", "pkg/api.py"),
        ("method", "pkg/_src/impl.py"),
        ("partial def", "pkg/_src/impl.py"),
        ("text", "pkg/notes.py"),
    ]
    by_kind = {h.kind: h for h in hits}
    assert by_kind["def"].line == 6
    assert by_kind["def"].text == "def foo_bar(x):"
    assert by_kind["primitive"].line == 3
    assert by_kind["text"].line == 1


def test_words_match_across_separators_and_case():
    query = locate.Query.parse("Shard map")
    for name in ("shard_map", "SHARD-MAP", "shard.map", "shardmap"):
        assert query.full(name), name
    assert not query.full("shard_mapping")


def test_dotted_query_prefers_files_on_that_path():
    query = locate.Query.parse("jax.lax.scan")
    assert query.hints == ("lax",)
    assert query.full("scan")


def test_installed_jax_while_loop(tmp_path):
    result = run_cli("locate", "while_loop", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "matches for 'while_loop' in jax " in lines[0]
    assert "jax/_src/lax/control_flow/loops.py:" in lines[1]
    assert " def " in lines[1]
    assert any("jax/lax/__init__.py:" in line and " public " in line for line in lines)
    assert len(lines) == 11  # header + the default 10


def test_installed_jax_module_and_primitive():
    roots = locate.installed_roots()
    assert [r.top.name for r in roots][:1] == ["jax"]
    hits = locate.locate(locate.Query.parse("custom partitioning"), roots)
    assert hits[0].kind == "module"
    assert hits[0].shown.endswith("custom_partitioning.py")
    assert any(h.kind == "primitive" and "custom_partitioning_p" in h.text for h in hits[:10])
    scan = locate.locate(locate.Query.parse("jax.lax.scan"), roots)
    assert scan[0].kind == "def"
    assert "/lax/" in scan[0].shown


def test_limit(tmp_path):
    result = run_cli("locate", "scan", "-n", "3", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith("3 of ")
    assert len(result.stdout.splitlines()) == 4


@pytest.fixture
def fake_checkout(tmp_path):
    repo = tmp_path / "jax"
    write(repo / "docs" / "notebooks" / "shard_map.md", "# Introduction to shard map\n\ntext\n")
    write(
        repo / "docs" / "sharding.rst",
        """\
        Using shard_map
        ===============

        ``jax.shard_map`` maps over shards.
        """,
    )
    write(
        repo / "tests" / "shard_map_test.py",
        """\
        import jax


        class ShardMapTest:
            def test_shard_map_basic(self):
                jax.shard_map
        """,
    )
    return repo


def test_repo_adds_docs_and_tests(tmp_path, fake_checkout):
    result = run_cli("locate", "shard_map", "--repo", str(fake_checkout), "-n", "100", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"docs/ of {fake_checkout}" in out.splitlines()[0]
    lines = out.splitlines()[1:]

    def find(place, kind):
        return any(place in line and f" {kind} " in line for line in lines)

    assert find("tests/shard_map_test.py:1", "test module")
    assert find("tests/shard_map_test.py:5", "test")
    assert find("docs/notebooks/shard_map.md:1", "heading")
    assert find("docs/sharding.rst:1", "heading")
    # the installed source still ranks first
    assert lines[0].split()[1].startswith("jax/")


def test_repo_roots_validation(tmp_path):
    with pytest.raises(UsageError, match="is not a directory"):
        locate.repo_roots(tmp_path / "missing")
    with pytest.raises(UsageError, match="neither docs/ nor tests/"):
        locate.repo_roots(tmp_path)


def test_no_match_is_exit_1(tmp_path):
    result = run_cli("locate", "qqzzxxyy_nothing", cwd=tmp_path)
    assert result.returncode == 1
    assert "no match for 'qqzzxxyy_nothing'" in result.stdout
    assert result.stderr == ""


BAD = [
    (["locate", " "], "the query is empty"),
    (["locate"], "the following arguments are required: query"),
    (["locate", "scan", "-n", "0"], "--limit must be at least 1"),
    (["locate", "scan", "--repo", "nowhere"], "'nowhere' is not a directory"),
    (["locate", "scan", "--repo", "."], "has neither docs/ nor tests/"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch, args, message):
    assert_usage_error(args, message, tmp_path, capsys, monkeypatch)
