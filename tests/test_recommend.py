"""`jax-ladder recommend`: the decision table case by case, its consistency, and
the command's inputs (flags, answers files, prompts) and errors."""

import ast
import email.message
import json
import random
import shlex
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, assert_usage_error, files_under, run_cli

from jax_ladder import cli, site
from jax_ladder import recommend as rec
from jax_ladder.commands import recommend as recommend_command
from jax_ladder.options import UsageError, load_options, parse_assignments
from jax_ladder.recommend import check
from jax_ladder.recommend.table import EXPORT_WINDOW
from jax_ladder.rungs import LADDER, by_name, template_dir

RULE = {r.id: r for r in rec.RULES}

# (answers that differ from the defaults, expected rule). Every rule appears at
# least once; the combinations are the judgment calls.
CASES = [
    ({}, "plain-jax"),
    ({"loop": "static", "carry": "varying"}, "python-loop-unrolled"),
    ({"library": "off-hot-path"}, "pure-callback"),
    ({"hotspot": "suspected"}, "profile-first"),
    ({"ship": "warm-start"}, "aot-warm-start"),
    ({"goal": "compile-time"}, "compile-time"),
    ({"goal": "run-time"}, "run-time"),
    ({"branch": "yes", "batch": "independent"}, "where"),
    ({"branch": "yes", "batch": "coupled"}, "where"),
    ({"batch": "independent"}, "vmap"),
    ({"batch": "coupled"}, "batched-jnp"),
    ({"loop": "data-dependent", "outputs": "every-step"}, "scan-bounded-outputs"),
    ({"loop": "data-dependent", "gradients": "yes"}, "scan-bounded-grad"),
    ({"loop": "data-dependent", "carry": "varying"}, "while-padded"),
    ({"loop": "data-dependent"}, "while-loop"),
    ({"loop": "static", "carry": "varying", "goal": "compile-time"}, "scan-padded"),
    ({"loop": "static", "outputs": "every-step"}, "scan"),
    ({"loop": "static"}, "fori-loop"),
    ({"loop": "static", "goal": "compile-time"}, "fori-loop"),
    # Independent items are vmap's case, whatever loop each item runs inside.
    ({"loop": "static", "batch": "independent"}, "vmap-over-loop"),
    ({"loop": "static", "batch": "independent", "outputs": "every-step"}, "vmap-over-loop"),
    ({"loop": "static", "batch": "independent", "goal": "memory"}, "lax-map-memory"),
    ({"branch": "yes"}, "cond"),
    ({"goal": "memory", "batch": "independent"}, "lax-map-memory"),
    ({"gradients": "yes", "autodiff": "too-much-memory"}, "checkpoint-residuals"),
    ({"devices": "explicit"}, "shard-map"),
    ({"devices": "compiler"}, "sharding"),
    ({"goal": "distributed"}, "distributed-simulated"),
    ({"goal": "memory"}, "memory"),
    ({"gradients": "yes", "autodiff": "wrong"}, "custom-jvp"),
    ({"gradients": "yes", "autodiff": "unstable"}, "custom-jvp"),
    ({"gradients": "yes", "autodiff": "too-slow"}, "custom-vjp"),
    ({"ship": "serialize"}, "export"),
    ({"devices": "compiler", "gather": "yes"}, "custom-partitioning"),
    ({"library": "hot-path", "backend": "tpu"}, "pallas-port-for-tpu"),
    ({"hotspot": "measured"}, "pallas"),
    ({"hotspot": "measured", "backend": "gpu"}, "pallas"),
    ({"hotspot": "measured", "backend": "cpu"}, "ffi-cpu-kernel"),
    ({"library": "hot-path", "backend": "gpu"}, "ffi-cuda"),
    ({"library": "hot-path"}, "ffi"),
    ({"library": "hot-path", "backend": "cpu"}, "ffi"),
    ({"internals": "new-primitive"}, "new-primitive"),
    ({"internals": "change-jax"}, "change-jax"),
    # A need that only a higher rung meets decides; the rest is used inside it.
    ({"ship": "serialize", "gradients": "yes", "autodiff": "wrong"}, "export"),
    ({"ship": "serialize", "loop": "data-dependent"}, "export"),
    ({"gradients": "yes", "autodiff": "too-slow", "loop": "data-dependent"}, "custom-vjp"),
    ({"devices": "explicit", "hotspot": "measured"}, "pallas"),
    ({"hotspot": "measured", "library": "hot-path"}, "ffi"),
    ({"hotspot": "measured", "library": "hot-path", "backend": "tpu"}, "pallas-port-for-tpu"),
    ({"internals": "new-primitive", "ship": "serialize", "hotspot": "measured"}, "new-primitive"),
    ({"loop": "data-dependent", "branch": "yes", "batch": "independent"}, "while-loop"),
    ({"goal": "memory", "gradients": "yes", "autodiff": "too-much-memory"}, "checkpoint-residuals"),
    ({"goal": "distributed", "devices": "explicit"}, "shard-map"),
    ({"hotspot": "suspected", "goal": "run-time"}, "profile-first"),
]


@pytest.mark.parametrize(
    ("given", "rule_id"),
    CASES,
    ids=[" ".join(f"{k}={v}" for k, v in g.items()) or "defaults" for g, _ in CASES],
)
def test_case(given, rule_id):
    result = rec.recommend(rec.resolve_answers(given))
    assert result.rule.id == rule_id
    assert result.rung.name == RULE[rule_id].rung
    assert result.rule.matches(result.answers)


def test_every_rule_and_every_rung_has_a_case():
    assert {rule for _, rule in CASES} == set(RULE)
    assert {RULE[rule].rung for _, rule in CASES} == {r.name for r in LADDER}


def test_the_table_is_consistent():
    assert check.check_table() == []


@pytest.mark.parametrize("rule", rec.RULES, ids=lambda r: r.id)
def test_every_rule_is_reachable(rule):
    answers = check.witness(rule)
    assert answers is not None, f"{rule.id} can never be recommended"
    assert rec.recommend(answers).rule is rule


@pytest.mark.parametrize("note", rec.NOTES, ids=lambda n: n.id)
def test_every_note_can_be_printed(note):
    answers = check.note_witness(note)
    assert answers is not None
    assert note in rec.recommend(answers).notes


def test_the_recommendation_meets_every_need_on_random_answers():
    # The lowest rung that meets every need: no matching rule is above it.
    rng = random.Random(7)
    for _ in range(3000):
        given = {}
        for q in rec.QUESTIONS:
            if rec.applies(q, given):
                given[q.key] = rng.choice(q.choices)
            else:
                given[q.key] = q.default
        result = rec.recommend(given)
        matched = [r for r in rec.RULES if r.matches(given)]
        assert result.rule in matched
        assert result.rung.step == max(by_name(r.rung).step for r in matched)
        assert all(r.matches(given) and r is not result.rule for r in result.also)
        assert not set(result.rule.supersedes) & {r.id for r in result.also}
        scaffolds = result.new_command is not None or result.asset is not None
        assert scaffolds == bool(result.rung.template)


def test_checker_finds_a_shadowed_rule_and_bad_references():
    vmap = RULE["vmap"]
    shadowed = rec.Rule(
        id="vmap-again",
        rung="plain-jax",
        when={"batch": ("independent",)},
        why="",
        use="",
        example=("", ""),
    )
    rules = list(rec.RULES)
    rules.insert(rules.index(vmap) + 1, shadowed)
    problems = check.check_table(rules=rules)
    assert problems == ["rule vmap-again is unreachable (vmap always win(s) over it)"]

    bad = rec.Rule(
        id="bad",
        rung="plain-jax",
        when={"colour": ("red",), "loop": ("sometimes",)},
        why="",
        use="",
        example=("",),
    )
    problems = check.check_table(rules=[bad, *rec.RULES])
    assert "rule bad: unknown question 'colour'" in problems
    assert "rule bad: bad answers ('sometimes',) for loop" in problems

    late = rec.Rule(
        id="late", rung="plain-jax", when={"branch": ("yes",)}, why="", use="", example=("", "")
    )
    problems = check.check_table(rules=[*rec.RULES, late])
    assert "rules are not listed lowest rung first" in problems

    never = rec.Note(
        id="never", when={"internals": ("new-primitive",)}, rungs=("plain-jax",), text=""
    )
    assert check.check_table(notes=[*rec.NOTES, never]) == ["note never can never be printed"]


def test_checker_finds_bad_questions():
    q = rec.Question(key="loop", text="again?", choices=("yes",), only_if={"later": ("x",)})
    problems = check.check_table(questions=[*rec.QUESTIONS, q])
    assert "duplicate question keys" in problems
    assert "question loop: needs two or more distinct choices" in problems
    assert "question loop: only_if on later, not an earlier question" in problems


def test_new_arguments_are_valid_template_options_and_assets_exist():
    for rule in rec.RULES:
        rung = by_name(rule.rung)
        for args in [rule.new_args, *(s.new_args for s in rule.starters)]:
            if not args or not rung.template:
                continue
            words = shlex.split(args)
            assert words[0::2] == ["--set"] * (len(words) // 2), rule.id
            parse_assignments(load_options(template_dir(rung)), words[1::2])
        for starter in rule.starters:
            assert not (starter.asset and starter.new_args), rule.id
            assert not starter.asset or (REPO / "assets" / starter.asset).is_file(), rule.id


def test_scaffold_line_follows_the_registry():
    for rung in LADDER:
        rule = next(r for r in rec.RULES if r.rung == rung.name)
        result = rec.recommend(check.witness(rule))
        text = rec.render(result)
        if result.asset:
            assert f"Scaffold: copy {result.asset}" in text
        elif rung.template:
            assert f"Scaffold: jax-ladder new {rung.name}" in text
        else:
            assert "jax-ladder new" not in text.split("Scaffold:")[1]
            assert rung.instead in text


ASSET = "assets/memory-and-sharding/remat_scan_train_step.py"


@pytest.mark.parametrize(
    ("given", "scaffold"),
    [
        # The Mosaic GPU note's advice, scaffolded (the template's default is TPU).
        (
            {"hotspot": "measured", "backend": "gpu"},
            "jax-ladder new pallas --set backend=mosaic_gpu",
        ),
        ({"hotspot": "measured", "backend": "tpu"}, "jax-ladder new pallas"),
        ({"hotspot": "measured"}, "jax-ladder new pallas"),
        ({"library": "hot-path", "backend": "gpu"}, "jax-ladder new ffi --set cuda=yes"),
        # Nothing sharded: the remat/scan asset, not the FSDP template.
        ({"loop": "data-dependent", "goal": "memory"}, f"copy {ASSET}"),
        ({"gradients": "yes", "autodiff": "too-much-memory"}, f"copy {ASSET}"),
        (
            {"gradients": "yes", "autodiff": "too-much-memory", "devices": "compiler"},
            "jax-ladder new memory-and-sharding --set remat=regather",
        ),
        ({"goal": "distributed"}, "jax-ladder new memory-and-sharding"),
    ],
    ids=lambda v: " ".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else "",
)
def test_the_scaffold_carries_what_the_answers_imply(given, scaffold):
    result = rec.recommend(rec.resolve_answers(given))
    line = next(x for x in rec.render(result).splitlines() if x.startswith("Scaffold:"))
    assert line.removesuffix(" in the jax-ladder repository") == f"Scaffold: {scaffold}"
    assert result.to_json()["asset" if "copy" in scaffold else "new_command"] in scaffold


def test_the_export_window_is_stated_once_and_quoted_where_the_kit_states_it():
    """JAX's export docs: an artifact runs on a JAX up to 6 months newer than the
    exporter; later ones retire serialization formats. The export template's
    description (docs/projects.md) and the export rung's page quote recommend's
    sentence verbatim, and nobody says 'about'."""
    window = rec.render(rec.recommend(rec.resolve_answers({"ship": "serialize"})))
    assert "at least six months of backward compatibility" in " ".join(window.split())
    sentence = " ".join(EXPORT_WINDOW.split())
    for path in ("docs/projects.md", "docs/rungs/5-export.md"):
        text = " ".join((REPO / path).read_text().split())
        assert sentence in text, path
        assert "about six months" not in text, path


PYTHON_EXAMPLES = [r for r in rec.RULES if r.id != "change-jax"]  # that one is shell


@pytest.mark.parametrize("rule", PYTHON_EXAMPLES, ids=lambda r: r.id)
def test_examples_are_two_lines_of_python(rule):
    assert len(rule.example) == 2
    ast.parse("\n".join(rule.example))


# Examples that need a compiled extension or a user's partition callback are
# only parsed; the rest run here, each in a fresh namespace.
NOT_RUN = {"ffi", "ffi-cpu-kernel", "ffi-cuda", "custom-partitioning"}
PRELUDE = """
import functools, numpy as np, jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
x = jnp.linspace(-1.0, 1.0, 8)
xs = jnp.ones((8, 8))
w = jnp.ones(8)
x0 = jnp.zeros(8)
f = jnp.sin
step = lambda v: 0.5 * (v + 1.0)
"""


def test_examples_run(tmp_path):
    runnable = [r for r in PYTHON_EXAMPLES if r.id not in NOT_RUN]
    # jax_num_cpu_devices must be set before the first JAX operation.
    runnable.sort(key=lambda r: "jax_num_cpu_devices" not in "".join(r.example))
    script = ["import json, traceback", "failures = {}"]
    for rule in runnable:
        code = "\n".join(rule.example).replace("/tmp/", f"{tmp_path.as_posix()}/")
        prelude = "import jax" if "jax_num_cpu_devices" in code else PRELUDE
        script += [
            "ns = {}",
            "try:",
            f"    exec({prelude!r}, ns)",
            f"    exec({code!r}, ns)",
            "except Exception:",
            f"    failures[{rule.id!r}] = traceback.format_exc(limit=2)",
        ]
    script.append("print(json.dumps(failures))")
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert failures == {}, "\n".join(f"{k}:\n{v}" for k, v in failures.items())


# -- the command ----------------------------------------------------------------


def test_flags_give_the_rung_why_rule_out_example_and_page(tmp_path):
    result = run_cli(
        "recommend",
        "--no-input",
        "--answer",
        "loop=data-dependent",
        "--answer",
        "gradients=yes",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Recommended rung: 2. transforms")
    assert "jax.grad through lax.while_loop fails" in out
    assert "Rule out first:" in out
    assert "lax.custom_root" in out
    assert "x_final, _ = lax.scan(body, x0, length=50)" in out
    assert site.describe("docs/rungs/2-transforms.md") in " ".join(out.split())
    assert "Also, inside it:" not in out  # while_loop is replaced, not added
    assert files_under(tmp_path) == []


def test_template_rungs_print_the_new_command(tmp_path):
    result = run_cli(
        "recommend",
        "--no-input",
        "--answer",
        "gradients=yes",
        "--answer",
        "autodiff=wrong",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Scaffold: jax-ladder new custom-vjp --set rule=jvp" in result.stdout
    assert site.describe("docs/rungs/4-custom-vjp.md") in " ".join(result.stdout.split())


def test_json_output(tmp_path):
    result = run_cli(
        "recommend", "--no-input", "--json", "--answer", "ship=serialize", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["rung"] == {"step": 5, "name": "export"}
    assert data["rule"] == "export"
    assert data["new_command"] == "jax-ladder new export"
    assert data["reference"] == "docs/rungs/5-export.md"
    assert (REPO / data["reference"]).is_file()
    assert data["reference_url"] == site.page_url("docs/rungs/5-export.md")
    assert "loop" in data["defaulted"]  # open, so its default
    assert "ship" not in data["defaulted"]
    assert len(data["example"]) == 2
    assert data["answers"]["ship"] == "serialize"
    assert data["answers"]["loop"] == "none"


def test_json_with_a_partial_answers_file_is_the_json_alone(tmp_path):
    """The README's command for scripts: --json asks nothing (a prompt would land
    in standard output), with or without standard input, and the questions left
    open take their defaults, as with --no-input; "defaulted" names them."""
    path = tmp_path / "answers.toml"
    path.write_text('ship = "serialize"\n')
    no_stdin = run_cli("recommend", "--answers", str(path), "--json", cwd=tmp_path)
    with_stdin = subprocess.run(
        [sys.executable, "-m", "jax_ladder", "recommend", "--answers", str(path), "--json"],
        input="static\n" * 30,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    for result in (no_stdin, with_stdin):
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        data = json.loads(result.stdout)
        assert data["rule"] == "export"
        assert data["answers"]["loop"] == "none"  # a default, not the "static" on stdin
        assert "loop" in data["defaulted"]
        assert "ship" not in data["defaulted"]
        assert "carry" not in data["defaulted"]  # asked only when loop is not none
        unanswered = rec.resolve_answers({"ship": "serialize"})
        assert data["answers"] == unanswered


def test_json_never_prompts_even_at_a_terminal(tmp_path, capsys, monkeypatch):
    def no_prompt(text):
        raise AssertionError(f"prompted: {text}")

    monkeypatch.setattr("builtins.input", no_prompt)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["recommend", "--json", "--answer", "gradients=yes"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answers"]["gradients"] == "yes"
    assert "autodiff" in data["defaulted"]


def test_the_reference_is_the_sites_page_not_a_file_here(tmp_path, monkeypatch):
    """Not the installed copy's file (a path into site-packages): the page on the
    documentation site, by its address where the kit's metadata records one."""
    result = run_cli("recommend", "--no-input", "--answer", "ship=serialize", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    reference = result.stdout[result.stdout.index("Reference: ") :].split("Answers: ")[0]
    assert "site-packages" not in result.stdout
    assert "rungs/5-export.html" in reference
    assert " ".join(reference.split()) == "Reference: " + site.describe("docs/rungs/5-export.md")

    base = "https://example.org/jax-ladder/"
    monkeypatch.setattr(site, "base_url", lambda: base)
    result = rec.recommend(rec.resolve_answers({"ship": "serialize"}))
    assert f"Reference: {base}rungs/5-export.html\n" in rec.render(result)
    assert result.to_json()["reference_url"] == f"{base}rungs/5-export.html"
    monkeypatch.setattr(site, "base_url", lambda: None)
    assert "Reference: rungs/5-export.html on the jax-ladder site (docs/rungs/5-export.md)" in (
        rec.render(result)
    )


def test_the_sites_address_is_the_packages_documentation_url(monkeypatch):
    metadata = email.message.Message()
    metadata["Project-URL"] = "Source, https://example.org/src"
    metadata["Project-URL"] = "Documentation, https://example.org/docs"
    monkeypatch.setattr(site.importlib.metadata, "metadata", lambda name: metadata)
    assert site.base_url() == "https://example.org/docs/"
    assert (
        site.page_url("docs/rungs/1-plain-jax.md")
        == "https://example.org/docs/rungs/1-plain-jax.html"
    )
    del metadata["Project-URL"]
    assert site.base_url() is None


@pytest.mark.parametrize("suffix", [".json", ".toml", ".txt"])
def test_answers_file(tmp_path, suffix):
    path = tmp_path / f"answers{suffix}"
    if suffix == ".toml":
        path.write_text('devices = "compiler"\ngather = "yes"\n')
    else:
        path.write_text(json.dumps({"devices": "compiler", "gather": "yes"}))
    result = run_cli("recommend", "--answers", str(path), "--no-input", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rule"] == "custom-partitioning"


def test_flags_override_the_answers_file(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text('hotspot = "measured"\n')
    result = run_cli(
        "recommend",
        "--answers",
        str(path),
        "--answer",
        "hotspot=suspected",
        "--no-input",
        "--json",
        cwd=tmp_path,
    )
    assert json.loads(result.stdout)["rule"] == "profile-first"


def test_answers_file_accepts_booleans_for_yes_no(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"gradients": True, "autodiff": "too-slow"}))
    assert rec.load_answers_file(path) == {"gradients": "yes", "autodiff": "too-slow"}


BAD = [
    (["--answer", "colour=red"], "unknown question 'colour'"),
    (["--answer", "loop=sometimes"], "loop='sometimes' is not allowed; use one of: none, static"),
    (["--answer", "loop"], "--answer expects KEY=VALUE, got 'loop'"),
    (["--answer", "carry=varying"], "carry=varying does not apply when loop=none"),
    (["--answer", "gather=yes"], "gather=yes does not apply when devices=single"),
    (["--answers", "missing.json"], "cannot read answers file 'missing.json'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch, args, message):
    assert_usage_error(["recommend", "--no-input", *args], message, tmp_path, capsys, monkeypatch)


BAD_FILES = [
    ("a.json", "{not json", "is not valid JSON or TOML"),
    ("a.toml", "loop = ", "is not valid JSON or TOML"),
    ("a.json", "[1, 2]", "must hold a mapping of question: answer"),
    ("a.json", '{"loop": 3}', "loop in"),
    ("a.toml", 'loop = "sometimes"', "loop='sometimes' is not allowed"),
    ("a.toml", 'colour = "red"', "unknown question 'colour'"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_FILES, ids=[t for _, t, _ in BAD_FILES])
def test_bad_answers_file_is_one_line_exit_2(tmp_path, capsys, monkeypatch, name, text, message):
    (tmp_path / name).write_text(text)
    args = ["recommend", "--answers", name, "--no-input"]
    assert_usage_error(args, message, tmp_path, capsys, monkeypatch)


def test_interactive_answers_on_stdin_reask_on_bad_values(tmp_path):
    # loop: bad, then data-dependent; carry: Enter; outputs: every-step; Enter for the rest.
    answers = ["sometimes", "data-dependent", "", "every-step"] + [""] * 20
    result = subprocess.run(
        [sys.executable, "-m", "jax_ladder", "recommend"],
        input="\n".join(answers) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "loop='sometimes' is not allowed" in result.stdout
    assert result.stdout.count("Does it loop") == 2
    assert "Recommended rung: 2. transforms" in result.stdout
    assert "Answers: loop=data-dependent, outputs=every-step" in result.stdout


def test_questions_that_do_not_apply_are_not_asked(monkeypatch):
    asked = []

    def ask(question):
        asked.append(question.key)
        return question.default

    rec.resolve_answers({}, ask=ask)
    assert "carry" not in asked
    assert "autodiff" not in asked
    assert "gather" not in asked
    asked.clear()
    rec.resolve_answers({"loop": "static", "gradients": "yes", "devices": "compiler"}, ask=ask)
    assert {"carry", "outputs", "autodiff", "gather"} <= set(asked)
    assert "loop" not in asked


def test_prompt_repeats_until_the_answer_is_valid(monkeypatch, capsys):
    answers = iter(["often", "static"])
    monkeypatch.setattr("builtins.input", lambda _: next(answers))
    assert recommend_command.ask_question(rec.QUESTION["loop"]) == "static"
    assert "use one of: none, static, data-dependent" in capsys.readouterr().out


def test_no_answer_on_stdin_is_a_usage_error(tmp_path):
    result = run_cli("recommend", cwd=tmp_path)
    assert result.returncode == 2
    assert "no answer to 'loop' on standard input" in result.stderr
    assert "--no-input" in result.stderr
    assert "Traceback" not in result.stderr


def test_list_questions(tmp_path):
    result = run_cli("recommend", "--list-questions", cwd=tmp_path)
    assert result.returncode == 0
    for q in rec.QUESTIONS:
        assert f"{q.key}: {q.text}" in result.stdout
    assert "asked when loop is static or data-dependent" in result.stdout


def test_resolve_rejects_unknown_keys():
    with pytest.raises(UsageError, match="unknown question 'nope'"):
        rec.resolve_answers({"nope": "x"})


def test_render_wraps_and_names_the_answers():
    text = rec.render(rec.recommend(rec.resolve_answers({})))
    assert text.splitlines()[0] == f"Recommended rung: 1. plain-jax ({LADDER[0].summary})"
    assert "Answers: all defaults" in text
    assert all(len(line) <= 100 for line in text.splitlines()), textwrap.shorten(text, 200)
