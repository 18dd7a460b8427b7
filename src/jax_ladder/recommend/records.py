"""The three kinds of record the recommend table is made of.

Keyword-only, so every entry in the table names its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jax_ladder.rungs import by_name

# Question key -> the answers accepted; a record's conditions must all hold.
type Conditions = Mapping[str, tuple[str, ...]]


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
    # Rules this one replaces when both match (not listed under "Also, inside it").
    supersedes: tuple[str, ...] = ()

    def matches(self, answers: Mapping[str, str]) -> bool:
        return all(answers[key] in values for key, values in self.when.items())

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
