"""`jax-ladder recommend`: ask the questions that decide the rung (or read the
answers) and print the lowest rung that fits, as text or, for scripts, JSON."""

from __future__ import annotations

import json
from pathlib import Path

from jax_ladder import recommend as rec
from jax_ladder.commands._common import Args, Subparsers, add_repeatable, prompt
from jax_ladder.rungs import docs_dir


def add_parser(sub: Subparsers) -> None:
    rcmd = sub.add_parser(
        "recommend",
        help="ask the questions that decide the rung and recommend the lowest that fits",
        description="Recommend the lowest rung that fits. Asks each question not answered "
        "by --answer or --answers; --no-input and --json take the defaults instead. "
        "Questions: " + ", ".join(f"{q.key} ({'/'.join(q.choices)})" for q in rec.QUESTIONS),
    )
    add_repeatable(
        rcmd, "--answer", "KEY=VALUE", "answer one question (repeatable); see --list-questions"
    )
    rcmd.add_argument(
        "--answers", type=Path, metavar="FILE", help="answers from a JSON or TOML file"
    )
    rcmd.add_argument(
        "--no-input", action="store_true", help="ask nothing; unanswered questions take defaults"
    )
    rcmd.add_argument(
        "--json",
        action="store_true",
        help="print the recommendation as JSON, and only that (implies --no-input; "
        "'defaulted' lists the questions that took their defaults)",
    )
    rcmd.add_argument(
        "--list-questions", action="store_true", help="print the questions and the allowed answers"
    )


def ask_question(question: rec.Question) -> str:
    if question.hint:
        print(f"  ({question.hint})")
    return prompt(
        f"{question.text} [{'/'.join(question.choices)}] ({question.default}): ",
        question.default,
        lambda text: rec.parse_answer(question, text),
        f"no answer to {question.key!r} on standard input; pass --answer "
        f"{question.key}=VALUE, --answers FILE, or --no-input to take defaults",
    )


def run(args: Args) -> int:
    if args.list_questions:
        for q in rec.QUESTIONS:
            when = "; asked when " + ", ".join(
                f"{k} is {' or '.join(v)}" for k, v in q.only_if.items()
            )
            print(f"{q.key}: {q.text}")
            print(f"    {' | '.join(q.choices)} (default {q.default}){when if q.only_if else ''}")
        return 0
    given = rec.load_answers_file(args.answers) if args.answers else {}
    given.update(rec.parse_answer_flags(args.answer))
    # JSON is for scripts: standard output holds the JSON alone, so nothing is
    # asked (a prompt would land in it) and each open question takes its
    # default, as with --no-input; the JSON's "defaulted" names them.
    prompting = not (args.json or args.no_input)
    asked: list[str] = []  # prompted for
    defaulted: list[str] = []  # took their defaults unasked

    def ask(question: rec.Question) -> str:
        if prompting:
            asked.append(question.key)
            return ask_question(question)
        defaulted.append(question.key)
        return question.default

    result = rec.recommend(rec.resolve_answers(given, ask=ask))
    if args.json:
        print(json.dumps({**result.to_json(), "defaulted": defaulted}, indent=2))
    else:
        print(("\n" if asked else "") + rec.render(result, page_root=_page_root()))
    return 0


def _page_root() -> Path | None:
    """The folder holding assets/ and docs/: the installed package, else the source checkout."""
    try:
        return docs_dir().parent
    except FileNotFoundError:
        return None
