"""The three kinds of record the recommend table is made of.

Keyword-only, so every entry in the table names its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from jax_ladder.rungs import by_name

# Question key -> the answers accepted; a record's conditions must all hold.
Conditions: TypeAlias = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True, kw_only=True)
class Question:
    key: str
    text: str
    choices: tuple[str, ...]  # the first is the default
    hint: str = ""  # what the choices mean, shown when asking
    # Asked only when every earlier answer named here is one of the values.
    only_if: Conditions = field(default_factory=dict)

    @property
    def default(self) -> str:
        return self.choices[0]


def applies(question: Question, answers: Mapping[str, str]) -> bool:
    """Whether `question` is asked, given the earlier `answers`."""
    return all(answers.get(k) in v for k, v in question.only_if.items())


@dataclass(frozen=True, kw_only=True)
class Starter:
    """What to scaffold for a rule when `when` holds, instead of its template's defaults:
    `jax-ladder new` with `new_args`, or a single-file starter under assets/."""

    when: Conditions
    new_args: str = ""  # extra `jax-ladder new` arguments the answers imply
    asset: str = ""  # a path under assets/, for answers the template does not fit
    why: str = ""  # why the asset rather than the template, printed beside it

    def applies(self, answers: Mapping[str, str]) -> bool:
        return all(answers[k] in v for k, v in self.when.items())


@dataclass(frozen=True, kw_only=True)
class Rule:
    """The lowest rung that meets one need: `when` the answers hold, use `use`."""

    id: str
    rung: str  # a rung name from the registry
    when: Conditions  # all must hold; the one rule without conditions is the fallback
    why: str
    use: str  # the primitive or API to reach for
    example: tuple[str, str]  # two lines of Python (or shell, for rung 9)
    rule_out: tuple[str, ...] = ()
    new_args: str = ""  # extra `jax-ladder new` arguments where the rung has a template
    # Where answers change what to scaffold: the first whose `when` holds wins.
    starters: tuple[Starter, ...] = ()
    # Rules this one replaces when both match (not listed under "Also, inside it").
    supersedes: tuple[str, ...] = ()

    def matches(self, answers: Mapping[str, str]) -> bool:
        return all(answers[key] in values for key, values in self.when.items())

    def starter(self, answers: Mapping[str, str]) -> Starter:
        """What to scaffold for these answers: the first starter that applies, else
        the template with `new_args`."""
        default = Starter(when={}, new_args=self.new_args)
        return next((s for s in self.starters if s.applies(answers)), default)

    @property
    def step(self) -> int:
        """The rung's step in the registry (1 to 9)."""
        rung = by_name(self.rung)
        assert rung is not None, self.rung
        return rung.step


@dataclass(frozen=True, kw_only=True)
class Note:
    """A caveat printed when its answers hold and the recommendation is one of `rungs`."""

    id: str
    when: Conditions
    rungs: tuple[str, ...]
    text: str

    def applies(self, answers: Mapping[str, str], rung: str) -> bool:
        return rung in self.rungs and all(answers[k] in v for k, v in self.when.items())
