"""`jax-ladder recommend`: the lowest rung that meets every need in the answers.

The table is data: `records.py` defines `Question`, `Rule` and `Note`;
`table.py` holds the questions, the rules and the notes. `answers.py` reads
answers from flags, files and prompts. This module is the engine: each
matching rule names the lowest rung that meets one need, so the
recommendation is the highest rung among the matching rules (the first listed
within a rung), and the other matching rules are mechanisms to use inside
it. `check.py` proves the table consistent; the tests run it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jax_ladder import site
from jax_ladder.recommend.answers import (
    load_answers_file,
    parse_answer,
    parse_answer_flags,
    resolve_answers,
)
from jax_ladder.recommend.records import Note, Question, Rule, Starter, applies
from jax_ladder.recommend.table import NOTES, QUESTION, QUESTIONS, RULES
from jax_ladder.rungs import Rung, by_name

__all__ = [
    "NOTES",
    "QUESTION",
    "QUESTIONS",
    "RULES",
    "Note",
    "Question",
    "Recommendation",
    "Rule",
    "Starter",
    "applies",
    "choose",
    "load_answers_file",
    "page_path",
    "parse_answer",
    "parse_answer_flags",
    "recommend",
    "render",
    "resolve_answers",
]


@dataclass(frozen=True)
class Recommendation:
    rung: Rung
    rule: Rule
    also: tuple[Rule, ...]  # other matching rules: mechanisms to use inside it
    notes: tuple[Note, ...]
    answers: Mapping[str, str]

    @property
    def starter(self) -> Starter:
        return self.rule.starter(self.answers)

    @property
    def new_command(self) -> str | None:
        """`jax-ladder new ...` for the answers; None without a template, or where a
        single-file asset fits the answers instead."""
        if not self.rung.template or self.starter.asset:
            return None
        return " ".join(filter(None, ["jax-ladder new", self.rung.name, self.starter.new_args]))

    @property
    def asset(self) -> str | None:
        """The single-file starter to copy, relative to the repository root, if any."""
        return f"assets/{self.starter.asset}" if self.starter.asset else None

    @property
    def page(self) -> str:
        return page_path(self.rung)

    def to_json(self) -> dict[str, Any]:
        return {
            "rung": {"step": self.rung.step, "name": self.rung.name},
            "rule": self.rule.id,
            "why": self.rule.why,
            "use": self.rule.use,
            "example": list(self.rule.example),
            "rule_out": list(self.rule.rule_out),
            "new_command": self.new_command,
            "asset": self.asset,
            "instead": None if self.rung.template else self.rung.instead,
            "also": [{"rule": r.id, "rung": r.rung, "use": r.use, "why": r.why} for r in self.also],
            "notes": [n.text for n in self.notes],
            "reference": self.page,
            "reference_url": site.page_url(self.page),
            "answers": dict(self.answers),
        }


def page_path(rung: Rung) -> str:
    """The rung's reference page, relative to the repository root."""
    return f"docs/rungs/{rung.step}-{rung.name}.md"


def choose(answers: Mapping[str, str], rules: Sequence[Rule] = RULES) -> Rule | None:
    """The recommended rule: the highest rung among the matches, earliest in the table."""
    best: Rule | None = None
    for rule in rules:
        if rule.matches(answers) and (best is None or rule.step > best.step):
            best = rule
    return best


def recommend(answers: Mapping[str, str]) -> Recommendation:
    rule = choose(answers)
    assert rule is not None, "the fallback rule matches everything"
    rung = by_name(rule.rung)
    assert rung is not None
    notes = tuple(n for n in NOTES if n.applies(answers, rung.name))
    return Recommendation(rung, rule, _also(rule, answers), notes, dict(answers))


def _also(chosen: Rule, answers: Mapping[str, str]) -> tuple[Rule, ...]:
    """The other matching rules, highest rung first, one per primitive, less those
    that a listed rule supersedes (the fallback rule is never listed)."""
    also, seen, replaced = [], {chosen.use}, set(chosen.supersedes)
    for other in sorted(RULES, key=lambda r: -r.step):
        if (
            other.when
            and other.matches(answers)
            and other.use not in seen
            and other.id not in replaced
        ):
            also.append(other)
            seen.add(other.use)
            replaced.update(other.supersedes)
    return tuple(also)


def render(rec: Recommendation, page_root: Path | None = None) -> str:
    r = rec.rung
    lines = [f"Recommended rung: {r.step}. {r.name} ({r.summary})", ""]
    lines += ["Why:", *_wrap(rec.rule.why, "  ")]
    lines += ["", f"Use: {rec.rule.use}", *(f"    {line}" for line in rec.rule.example)]
    lines += _bullets("Rule out first:", rec.rule.rule_out)
    if rec.also:
        lines += ["", "Also, inside it:"]
        lines += [f"  - {o.use} (rung {o.step}, {o.rung})" for o in rec.also]
    lines += _bullets("Notes:", [note.text for note in rec.notes])
    lines.append("")
    if rec.asset:
        lines.append(f"Scaffold: copy {_in_repository(rec.asset, page_root)}")
        lines += _wrap(f"(a single-file starter: {rec.starter.why})", "  ")
    elif rec.new_command:
        lines.append(f"Scaffold: {rec.new_command}")
    else:
        lines.append(f"Scaffold: the kit has no template for this rung; use {r.instead}")
    # The site's page, not the installed copy's file: a path into site-packages
    # means nothing to a reader, and the site renders the page's links.
    lines += _wrap(f"Reference: {site.describe(rec.page)}", "", "  ")
    chosen = ", ".join(f"{k}={v}" for k, v in rec.answers.items() if v != QUESTION[k].default)
    lines.append(f"Answers: {chosen or 'all defaults'}")
    return "\n".join(lines)


def _in_repository(path: str, root: Path | None) -> str:
    """Where `path` (relative to the repository root) is here, if it is: a file
    to copy is worth its path on this machine."""
    if root is not None and (root / path).is_file():
        return str(root / path)
    return f"{path} in the jax-ladder repository"


def _bullets(title: str, items: Sequence[str]) -> list[str]:
    """A titled list of wrapped items after a blank line; nothing when there are none."""
    if not items:
        return []
    lines = ["", title]
    for item in items:
        lines += _wrap(item, "  - ", "    ")
    return lines


def _wrap(text: str, first: str, rest: str | None = None, width: int = 88) -> list[str]:
    rest = first if rest is None else rest
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest) or [first]
