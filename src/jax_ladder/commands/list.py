"""`jax-ladder list`: the nine rungs and how to scaffold each."""

from __future__ import annotations

from jax_ladder.commands._common import Args, Subparsers
from jax_ladder.rungs import LADDER


def add_parser(sub: Subparsers) -> None:
    sub.add_parser("list", help="show the nine rungs and how to scaffold each")


def run(args: Args) -> int:
    print("The JAX escalation ladder (climb only as far as you must):\n")
    for r in LADDER:
        mark = "*" if r.template else " "
        how = f"jax-ladder new {r.name}" if r.template else f"no template: {r.instead}"
        print(f"{mark} {r.step}. {r.name:<20} {r.summary}")
        print(f"     {how}")
    print("\n* = the kit has a template for this rung")
    return 0
