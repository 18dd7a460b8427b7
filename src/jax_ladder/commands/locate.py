"""`jax-ladder locate QUERY`: where a JAX concept lives in the installed JAX."""

from __future__ import annotations

from pathlib import Path

from jax_ladder import locate
from jax_ladder.commands._common import Args, Subparsers
from jax_ladder.options import UsageError
from jax_ladder.versions import JAX_SPEC


def add_parser(sub: Subparsers) -> None:
    loc = sub.add_parser(
        "locate",
        help="find where a JAX concept lives in the installed JAX (for rung 9)",
        description="Ranked places where QUERY lives: modules, definitions, primitives, "
        "public names, then text. Exit status 0 with matches, 1 with none.",
    )
    loc.add_argument("query", nargs="+", help="a name or words, e.g. shard_map or 'while loop'")
    loc.add_argument("--repo", type=Path, help="a JAX checkout: also search its docs/ and tests/")
    loc.add_argument(
        "-n", "--limit", type=int, default=10, help="how many matches to print (default 10)"
    )


def run(args: Args) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    query = locate.Query.parse(" ".join(args.query))
    roots = locate.installed_roots()
    if not roots:
        raise UsageError(f"jax is not installed here; pip install 'jax{JAX_SPEC}'")
    if args.repo is not None:
        roots += locate.repo_roots(args.repo)
    hits = locate.locate(query, roots)
    if not hits:
        where = "; ".join(root.label for root in roots)
        print(f"no match for {query.text!r} in {where}; try fewer or other words")
        return 1
    print(locate.render(query, roots, hits, args.limit))
    return 0
