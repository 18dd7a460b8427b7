"""Answers to the recommend questions: from --answer flags, an answers file
(JSON or TOML) or prompts, checked against the questions and resolved so that
every question has one."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from jax_ladder.options import UsageError, check_choice, split_assignment
from jax_ladder.recommend.records import Question, applies
from jax_ladder.recommend.table import QUESTION, QUESTIONS

Ask: TypeAlias = Callable[[Question], str]


def parse_answer(question: Question, text: str) -> str:
    return check_choice(question.key, text.strip(), question.choices)


def parse_answer_flags(items: Iterable[str]) -> dict[str, str]:
    """["key=value", ...] from --answer, validated."""
    given: dict[str, str] = {}
    for item in items:
        key, value = split_assignment(item, "--answer")
        question = QUESTION[_known_key(key.strip())]
        given[question.key] = parse_answer(question, value)
    return given


def _known_key(key: str) -> str:
    if key not in QUESTION:
        raise UsageError(f"unknown question {key!r}; the questions are: {', '.join(QUESTION)}")
    return key


def load_answers_file(path: Path) -> dict[str, str]:
    """A flat mapping of question keys to answers, in JSON or TOML."""
    data = _read_mapping(path)
    given = {}
    for key, value in data.items():
        question = QUESTION[_known_key(str(key))]
        if isinstance(value, bool) and set(question.choices) >= {"yes", "no"}:
            value = "yes" if value else "no"
        if not isinstance(value, str):
            raise UsageError(f"{key} in {str(path)!r} must be a string, got {value!r}")
        given[key] = parse_answer(question, value)
    return given


def _read_mapping(path: Path) -> dict[Any, Any]:
    """The file's data, by its suffix (else JSON, then TOML); it must be a mapping."""
    try:
        text = path.read_text()
    except OSError as err:
        raise UsageError(f"cannot read answers file {str(path)!r}: {err.strerror}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:  # guess: JSON first, then TOML
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        first = str(err).splitlines()[0]
        raise UsageError(f"answers file {str(path)!r} is not valid JSON or TOML: {first}") from None
    if not isinstance(data, dict):
        raise UsageError(f"answers file {str(path)!r} must hold a mapping of question: answer")
    return data


def resolve_answers(given: Mapping[str, str], ask: Ask | None = None) -> dict[str, str]:
    """Every question answered: given, else asked (`ask`), else its default.

    A question that does not apply (its `only_if` fails) takes its default; an
    explicit other answer to it is a contradiction and a UsageError.
    """
    unknown = [k for k in given if k not in QUESTION]
    if unknown:
        _known_key(unknown[0])
    answers: dict[str, str] = {}
    for q in QUESTIONS:
        relevant = applies(q, answers)
        if q.key in given:
            value = parse_answer(q, given[q.key])
            if not relevant and value != q.default:
                why = ", ".join(f"{k}={answers[k]}" for k in q.only_if)
                raise UsageError(
                    f"{q.key}={value} does not apply when {why}; drop it or change {why}"
                )
            answers[q.key] = value
        elif relevant and ask is not None:
            answers[q.key] = ask(q)
        else:
            answers[q.key] = q.default
    return answers
