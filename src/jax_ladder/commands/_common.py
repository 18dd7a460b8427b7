"""What several commands share: the argument parser's class, the rung lookup and
the prompt."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn, TypeAlias, TypeVar

from jax_ladder.options import Option, UsageError, parse_value
from jax_ladder.rungs import Rung, available, by_name

Args: TypeAlias = argparse.Namespace


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line with a hint, exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


def add_repeatable(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str) -> None:
    """A flag given any number of times: its values in order, [] when it is absent."""
    parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help)


def rung_or_error(name: str) -> Rung:
    """The registry's rung `name`, which must have a template; else a UsageError."""
    rung = by_name(name)
    names = ", ".join(r.name for r in available())
    if rung is None:
        raise UsageError(f"unknown rung {name!r}; choose one of: {names}")
    if not rung.template:
        raise UsageError(
            f"the kit has no template for {name!r} yet ({rung.instead}); "
            f"templates exist for: {names}"
        )
    return rung


T = TypeVar("T")


def prompt(prompt: str, default: T, parse: Callable[[str], T], no_answer: str) -> T:
    """Ask until parse(text) accepts the answer; Enter keeps the default.

    parse raises UsageError for a bad answer, which is shown before asking
    again; with nothing left on standard input, UsageError(no_answer).
    """
    while True:
        try:
            text = input(prompt).strip()
        except EOFError:
            raise UsageError(no_answer) from None
        if not text:
            return default
        try:
            return parse(text)
        except UsageError as err:
            print(f"  {err}")


def ask_option(option: Option, default: object) -> object:
    """Ask for a template option's value (`new`, and `update` for a new option)."""
    hint = f" [{'/'.join(option.choices)}]" if option.choices else ""
    return prompt(
        f"{option.prompt}{hint} ({default}): ",
        default,
        lambda text: parse_value(option, text),
        "no answer on standard input; pass --no-input to take defaults",
    )
