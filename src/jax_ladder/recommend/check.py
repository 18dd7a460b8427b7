"""A proof that the recommend table is consistent, for the tests.

`check_table()` lists every problem: unknown keys, answers or rungs, a rule or
note that can never be printed (found by searching the answer space), a rung
that no rule recommends. `witness()` and `note_witness()` give answers that
reach a rule or a note.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jax_ladder.recommend.records import Conditions, Note, Question, Rule, applies
from jax_ladder.recommend.table import NOTES, QUESTION, QUESTIONS, RULES
from jax_ladder.rungs import LADDER


def solve(must: Iterable[Rule | Note], must_not: Iterable[Rule] = ()) -> dict[str, str] | None:
    """Answers (respecting `only_if`) that match everything in `must` and no rule in
    `must_not`, or None when there are none.

    A depth-first search over the questions in order. It prunes as soon as a
    `must_not` rule is matched, counting answers that `must` already forces.
    """
    must_not = list(must_not)
    need: dict[str, set[str]] = {}
    for item in must:
        for key, values in item.when.items():
            need[key] = need.get(key, set(QUESTION[key].choices)) & set(values)

    def matched(rule: Rule, answers: dict[str, str]) -> bool:
        return all(
            answers[k] in v if k in answers else (k in need and need[k] <= set(v))
            for k, v in rule.when.items()
        )

    def search(i: int, answers: dict[str, str]) -> dict[str, str] | None:
        if any(matched(r, answers) for r in must_not):
            return None
        if i == len(QUESTIONS):
            return dict(answers)
        q = QUESTIONS[i]
        options = q.choices if applies(q, answers) else (q.default,)
        for value in options:
            if q.key in need and value not in need[q.key]:
                continue
            answers[q.key] = value
            found = search(i + 1, answers)
            del answers[q.key]
            if found is not None:
                return found
        return None

    return search(0, {})


def beaten_by(rule: Rule, rules: Sequence[Rule] = RULES) -> list[Rule]:
    """The rules that win over `rule` whenever both match."""
    index = rules.index(rule)
    return [
        r for i, r in enumerate(rules) if r.step > rule.step or (r.step == rule.step and i < index)
    ]


def witness(rule: Rule, rules: Sequence[Rule] = RULES) -> dict[str, str] | None:
    """Answers for which `rule` is the recommendation; None if it is unreachable."""
    return solve([rule], beaten_by(rule, rules))


def note_witness(note: Note, rules: Sequence[Rule] = RULES) -> dict[str, str] | None:
    """Answers for which `note` is printed; None if it never is."""
    for rule in rules:
        if rule.rung in note.rungs:
            found = solve([rule, note], beaten_by(rule, rules))
            if found is not None:
                return found
    return None


def check_table(
    questions: Sequence[Question] = QUESTIONS,
    rules: Sequence[Rule] = RULES,
    notes: Sequence[Note] = NOTES,
) -> list[str]:
    """Every problem with the questions, rules and notes; empty when consistent.

    (The reachability checks search over the table's QUESTIONS.)
    """
    problems = _question_problems(questions) + _reference_problems(questions, rules, notes)
    if problems:  # the search below assumes every reference is sound
        return problems
    return _reachability_problems(rules, notes)


def _question_problems(questions: Sequence[Question]) -> list[str]:
    problems: list[str] = []
    keys = [q.key for q in questions]
    known = {q.key: q for q in questions}
    if len(set(keys)) != len(keys):
        problems.append("duplicate question keys")
    for i, q in enumerate(questions):
        if len(q.choices) < 2 or len(set(q.choices)) != len(q.choices):
            problems.append(f"question {q.key}: needs two or more distinct choices")
        for key, values in q.only_if.items():
            if key not in keys[:i]:
                problems.append(f"question {q.key}: only_if on {key}, not an earlier question")
            elif not set(values) <= set(known[key].choices):
                problems.append(f"question {q.key}: only_if {key} has unknown answers")
    return problems


def _reference_problems(
    questions: Sequence[Question], rules: Sequence[Rule], notes: Sequence[Note]
) -> list[str]:
    """Unknown rule ids, rungs, question keys and answers named by rules and notes."""
    known = {q.key: q for q in questions}
    names = [r.name for r in LADDER]
    ids = {r.id for r in rules}
    problems = ["duplicate rule ids"] if len(ids) != len(rules) else []
    for rule in rules:
        problems += [
            f"rule {rule.id}: supersedes unknown rule {x!r}"
            for x in rule.supersedes
            if x not in ids
        ]
    # (label, conditions, rungs named) of every rule, note and rule's starter.
    items: list[tuple[str, Conditions, tuple[str, ...]]] = [
        *((f"rule {r.id}", r.when, (r.rung,)) for r in rules),
        *((f"note {n.id}", n.when, n.rungs) for n in notes),
        *((f"rule {r.id}'s starter", s.when, ()) for r in rules for s in r.starters),
    ]
    for label, when, rungs in items:
        problems += [f"{label}: unknown rung {r!r}" for r in rungs if r not in names]
        for key, values in when.items():
            if key not in known:
                problems.append(f"{label}: unknown question {key!r}")
            elif not values or not set(values) <= set(known[key].choices):
                problems.append(f"{label}: bad answers {values!r} for {key}")
    return problems


def _reachability_problems(rules: Sequence[Rule], notes: Sequence[Note]) -> list[str]:
    """Order, the one fallback, and that every rule, note and rung can be reached."""
    problems: list[str] = []
    steps = [r.step for r in rules]
    if steps != sorted(steps):
        problems.append("rules are not listed lowest rung first")
    if [r.rung for r in rules if not r.when] != ["plain-jax"]:
        problems.append("there must be exactly one fallback rule (no conditions), at plain-jax")
    for rule in rules:
        if len(rule.example) != 2:
            problems.append(f"rule {rule.id}: the example must be two lines")
        if witness(rule, rules) is None:
            problems.append(f"rule {rule.id} is unreachable ({_shadow(rule, rules)})")
    problems += [
        f"note {n.id} can never be printed" for n in notes if note_witness(n, rules) is None
    ]
    reached = {r.rung for r in rules}
    problems += [f"no rule recommends rung {r.name}" for r in LADDER if r.name not in reached]
    return problems


def _shadow(rule: Rule, rules: Sequence[Rule]) -> str:
    """Why `rule` never wins: the rules that match whenever it does, if any."""
    covering = [
        r.id
        for r in beaten_by(rule, rules)
        if all(key in rule.when and set(rule.when[key]) <= set(v) for key, v in r.when.items())
    ]
    if covering:
        return f"{', '.join(covering)} always win(s) over it"
    return "rules of higher rank cover all its answers together"
