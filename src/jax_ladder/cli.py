"""The `jax-ladder` command: list, new, demo, update, recommend, doctor, locate,
opcheck.

This module wires the parser and turns errors into exit statuses; each command
is a module of `jax_ladder.commands` (its `add_parser` and its `run`).
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from jax_ladder import __version__
from jax_ladder.commands import demo, doctor, locate, new, opcheck, recommend, update
from jax_ladder.commands import list as list_
from jax_ladder.commands._common import Parser
from jax_ladder.options import UsageError
from jax_ladder.scaffold import GenerationError

# The commands, in the order `jax-ladder --help` lists them.
COMMANDS: dict[str, ModuleType] = {
    "list": list_,
    "new": new,
    "demo": demo,
    "update": update,
    "recommend": recommend,
    "doctor": doctor,
    "locate": locate,
    "opcheck": opcheck,
}


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="jax-ladder", description="Starters for each rung of JAX's escalation ladder.")
    p.add_argument("--version", action="version", version=f"jax-ladder {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        status: int = COMMANDS[args.command].run(args)
        return status
    except UsageError as err:
        print(f"jax-ladder: error: {err}", file=sys.stderr)
        return 2
    except GenerationError as err:
        print(f"jax-ladder: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("jax-ladder: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `jax-ladder list | head`
        sys.stderr.close()
        return 0
