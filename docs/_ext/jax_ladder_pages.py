"""Write the site's generated pages (docs/_generated/, git-ignored) from the files
that hold each fact, when Sphinx starts: nothing here is a second copy.

- landing.md and ladder.svg: the registry (jax_ladder.rungs.LADDER);
- recommend.md and rules.svg: the recommend table (questions, rules, notes);
- templates/<step>-<rung>.md: each template's cookiecutter.json (options and
  prompts), its folder (the generated layout), the "Adapt it" and support tables
  of its README rendered with the defaults, and its benchmark plot if one exists;
- examples/<name>.md: examples/<name>/README.md, and the ladder example's plot,
  drawn from its stored measurement (examples/ladder/results.json);
- cli.md: the argparse parser's help, command by command;
- changelog.md: CHANGELOG.md.

docs/rungs/*.md and docs/architecture.md are pages as they stand.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import os
import re
import shutil
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

from jax_ladder import cli
from jax_ladder.options import load_options, resolve
from jax_ladder.recommend import NOTES, QUESTIONS, RULES, page_path
from jax_ladder.recommend.records import Conditions, Rule
from jax_ladder.rungs import LADDER, Rung, available

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "_generated"
PROJECT = "{{cookiecutter.project_name}}"
PLACEHOLDERS = {"{{cookiecutter.package_name}}": "<package>", "{{cookiecutter.op_name}}": "<op>"}
# Sections of a template's README, between these markers, shown on its page.
SECTIONS = {
    "Adapt it": ("<!-- adapt-table", "<!-- /adapt-table -->"),
    "What it supports": ("<!-- support-table", "<!-- /support-table -->"),
}
# A template's measured benchmark plot (`benchmarks/bench.py --plot`), which its
# generated docs show too.
BENCH_PLOT = f"{PROJECT}/docs/benchmark.svg"
TEMPLATE_FILL, NO_TEMPLATE_FILL, INK = "#dbe7fb", "#f2f2f2", "#1f2a44"


# -- writing ---------------------------------------------------------------------------
WRITTEN: set[Path] = set()  # this build's files; generate() removes any other


def write(path: Path, text: str) -> None:
    """Write only what changed, so Sphinx rereads only the pages whose sources changed."""
    WRITTEN.add(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def cell(text: object) -> str:
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" role="img">\n'
        f"<title>{esc(title)}</title>\n" + "\n".join(body) + "\n</svg>\n"
    )


def text_lines(x: int, y: int, lines: list[str], size: int = 12, bold_first: bool = False) -> str:
    spans = []
    for i, line in enumerate(lines):
        weight = ' font-weight="bold"' if bold_first and i == 0 else ""
        spans.append(f'<tspan x="{x}" dy="{0 if i == 0 else size + 4}"{weight}>{esc(line)}</tspan>')
    return f'<text x="{x}" y="{y}" font-size="{size}" fill="{INK}">{"".join(spans)}</text>'


# -- the landing page: the ladder ------------------------------------------------------
def template_page(rung: Rung) -> str:
    return f"templates/{rung.step}-{rung.name}"


def ladder_svg() -> str:
    """The nine rungs, step 1 at the bottom, a filled rung where the kit has a template."""
    width, row, top = 780, 58, 16
    height = top * 2 + row * len(LADDER)
    body = [
        f'<line x1="24" y1="6" x2="24" y2="{height - 6}" stroke="{INK}" stroke-width="4"/>',
        f'<line x1="{width - 24}" y1="6" x2="{width - 24}" y2="{height - 6}" '
        f'stroke="{INK}" stroke-width="4"/>',
    ]
    for i, rung in enumerate(reversed(LADDER)):
        y = top + i * row
        fill = TEMPLATE_FILL if rung.template else NO_TEMPLATE_FILL
        dash = "" if rung.template else ' stroke-dasharray="5 4"'
        body.append(
            f'<rect x="24" y="{y}" width="{width - 48}" height="{row - 10}" rx="6" '
            f'fill="{fill}" stroke="{INK}"{dash}/>'
        )
        second = (
            f"template: jax-ladder new {rung.name}"
            if rung.template
            else f"no template: use {rung.instead}"
        )
        first = f"{rung.step}  {rung.name}: {rung.summary}"
        body.append(text_lines(40, y + 19, [first, second], bold_first=True))
    return svg(width, height, body, "The ladder: nine rungs, step 1 at the bottom")


def landing() -> str:
    rows = []
    for rung in LADDER:
        # Links relative to docs/index.md, which includes this page.
        page = f"[{rung.name}]({page_path(rung).removeprefix('docs/')})"
        kit = f"[template](_generated/{template_page(rung)}.md)" if rung.template else ""
        rows.append((rung.step, page, rung.summary, kit or f"use {rung.instead}"))
    return (
        "Climb only as far as you must: each rung buys control and costs code, tests and "
        "portability. The filled rungs have a template (`jax-ladder new RUNG`); the dashed "
        "ones are plain JAX, with no starter needed.\n\n"
        "![The ladder: nine rungs, the ones with a template filled](ladder.svg)\n\n"
        + table(("step", "rung (reference page)", "what it buys", "starter"), rows)
    )


# -- "Which rung?": the recommend table ------------------------------------------------
def conditions(when: Conditions) -> str:
    return " and ".join(f"{k}={'/'.join(v)}" for k, v in when.items()) or "otherwise (fallback)"


def rule_box(rule: Rule) -> list[str]:
    return [
        rule.id,
        *textwrap.wrap(f"if {conditions(rule.when)}", 46, break_long_words=False),
        *textwrap.wrap(f"use {rule.use}", 46, break_long_words=False),
    ]


def rules_svg() -> str:
    """One band per rung, bottom rung first; in it, its rules in table order, two a row."""
    label_w, box_w, gap, line_h = 170, 310, 10, 16
    width = label_w + 2 * (box_w + gap) + gap
    body, y = [], gap
    for rung in LADDER:
        boxes = [rule_box(rule) for rule in RULES if rule.rung == rung.name]
        if not boxes:
            continue
        band_top = y
        for pair in (boxes[i : i + 2] for i in range(0, len(boxes), 2)):
            h = max(len(b) for b in pair) * line_h + 12
            for j, lines in enumerate(pair):
                x = label_w + gap + j * (box_w + gap)
                body.append(
                    f'<rect x="{x}" y="{y}" width="{box_w}" height="{h}" rx="4" '
                    f'fill="white" stroke="{INK}"/>'
                )
                body.append(text_lines(x + 8, y + 16, lines, size=11, bold_first=True))
            y += h + gap
        fill = TEMPLATE_FILL if rung.template else NO_TEMPLATE_FILL
        body.insert(
            0,
            f'<rect x="{gap}" y="{band_top - 4}" width="{width - 2 * gap}" '
            f'height="{y - band_top}" fill="{fill}"/>',
        )
        body.append(text_lines(gap + 8, band_top + 18, [f"{rung.step}  {rung.name}"], size=13))
        y += gap
    return svg(width, y, body, "The recommend rules, grouped by the rung each names")


def recommend_page() -> str:
    questions = [
        (
            f"`{q.key}`",
            q.text,
            ", ".join(f"`{c}`" for c in q.choices),
            conditions(q.only_if) if q.only_if else "always",
        )
        for q in QUESTIONS
    ]
    rules = [(f"`{r.id}`", r.rung, conditions(r.when), r.use, r.why) for r in RULES]
    notes = [(f"`{n.id}`", ", ".join(n.rungs), conditions(n.when), n.text) for n in NOTES]
    return (
        "# Which rung?\n\n"
        "`jax-ladder recommend` asks the questions below and applies these rules. Each rule "
        "names the lowest rung that meets one need; the recommendation is the highest rung "
        "among the rules that match (the first listed within a rung), and the other matching "
        "rules are mechanisms to use inside it.\n\n"
        "![The recommend rules, grouped by rung](rules.svg)\n\n"
        "## The questions\n\nAsked in this order; the first choice is the default.\n\n"
        + table(("key", "question", "choices", "asked when"), questions)
        + "\n## The rules\n\n"
        + table(("rule", "rung", "when", "use", "why"), rules)
        + "\n## The notes\n\nCaveats printed beside a recommended rung.\n\n"
        + table(("note", "rungs", "when", "text"), notes)
    )


# -- one page per template -------------------------------------------------------------
def layout(template: Path) -> str:
    """The template's files, placeholders named for what they become."""
    root = template / PROJECT
    paths = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    for placeholder, name in PLACEHOLDERS.items():
        paths = [p.replace(placeholder, name) for p in paths]
    return "```text\n" + "\n".join(paths) + "\n```\n"


def readme_sections(template: Path) -> dict[str, str]:
    """The marked sections of the template's README, rendered with the default options."""
    from cookiecutter.environment import StrictEnvironment

    # The options with their defaults, and the private keys (_jax_spec) a README may name.
    raw = json.loads((template / "cookiecutter.json").read_text())
    context = {k: v for k, v in raw.items() if k.startswith("_")}
    context |= resolve(load_options(template), {})
    readme = (template / PROJECT / "README.md").read_text()
    text = StrictEnvironment(keep_trailing_newline=True).from_string(readme)
    rendered = text.render(cookiecutter=context)
    found = {}
    for title, (start, end) in SECTIONS.items():
        if start in rendered and end in rendered:
            body = rendered.split(start, 1)[1].split("-->", 1)[1].split(end, 1)[0]
            # Links to the project's own files lead nowhere here: keep their text.
            found[title] = re.sub(r"\[([^\]]+)\]\((?!https?:|#)[^)]+\)", r"\1", body.strip())
    return found


def template_md(rung: Rung, images: Path) -> str:
    assert rung.template
    template = ROOT / "templates" / rung.template
    options = [
        (f"`{o.key}`", "derived" if o.derived else f"`{o.default}`", ", ".join(o.choices), o.prompt)
        for o in load_options(template).values()
    ]
    parts = [
        f"# {rung.name} (rung {rung.step})\n\n{rung.summary}. "
        f"When to use it: [the reference page](../../{page_path(rung).removeprefix('docs/')}).\n\n"
        f"```console\n$ jax-ladder new {rung.name} --set KEY=VALUE ...\n```\n",
        "## Options\n\nFrom the template's `cookiecutter.json`: the prompt is what "
        "`jax-ladder new` asks.\n\n" + table(("option", "default", "choices", "prompt"), options),
        "## Generated layout\n\nThe template's files, before its post-generation hook picks "
        "the files an option chooses; `<package>` and `<op>` are the package and op names.\n\n"
        + layout(template),
    ]
    parts += [
        f"## {title}\n\nFrom the generated README, with the default options.\n\n{body}\n"
        for title, body in readme_sections(template).items()
    ]
    plot = template / BENCH_PLOT
    if plot.is_file():
        name = f"{rung.step}-{rung.name}-bench.svg"
        copy_if_changed(plot, images / name)
        parts.append(
            f"## Benchmark\n\nThe worked example's `benchmarks/bench.py --plot`, with the "
            f"machine and date it was measured on.\n\n![{rung.name}'s measured benchmark]({name})\n"
        )
    return "\n".join(parts)


def copy_if_changed(source: Path, target: Path) -> None:
    WRITTEN.add(target)
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)


# -- the worked examples ---------------------------------------------------------------
def example_md(folder: Path, out: Path) -> str:
    page = f"```{{include}} ../../../examples/{folder.name}/README.md\n```\n"
    results = folder / "results.json"
    if results.is_file():
        plot = load_module(folder / "plot.py")
        measured = plot.load(results)
        drawing = out / "examples" / f"{folder.name}.svg"
        plot.plot(measured, drawing)
        WRITTEN.add(drawing)
        load = f", load average {measured['load_average']}" if "load_average" in measured else ""
        page += (
            "\n## The table as a picture\n\n"
            f"`bench.py --plot` from the stored measurement (`results.json`): "
            f"{measured['machine']}, jax {measured['jax']}, {measured['date']}{load}.\n\n"
            f"![bench.py's table, drawn]({folder.name}.svg)\n"
        )
    return page


def load_module(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"_site_{path.parent.name}_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the CLI reference -----------------------------------------------------------------
def cli_md() -> str:
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "96"  # argparse wraps to the terminal's width; fix it
    try:
        parser = cli._parser()
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parts = ["# Command line\n\n", f"```text\n{parser.format_help()}```\n"]
        for name, command in sub.choices.items():
            parts.append(f"\n## {name}\n\n```text\n{command.format_help()}```\n")
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "".join(parts)


# -- Sphinx ----------------------------------------------------------------------------
def generate(out: Path = OUT) -> None:
    pages: dict[str, Callable[[], str]] = {
        "landing.md": landing,
        "ladder.svg": ladder_svg,
        "recommend.md": recommend_page,
        "rules.svg": rules_svg,
        "cli.md": cli_md,
        "changelog.md": lambda: "```{include} ../../CHANGELOG.md\n```\n",
    }
    for name, make in pages.items():
        write(out / name, make())
    (out / "templates").mkdir(parents=True, exist_ok=True)
    for rung in available():
        write(out / f"{template_page(rung)}.md", template_md(rung, out / "templates"))
    for folder in sorted((ROOT / "examples").iterdir()):
        if (folder / "README.md").is_file():
            write(out / "examples" / f"{folder.name}.md", example_md(folder, out))
    # A page whose source is gone (a template or example removed) goes too.
    for stale in [p for p in out.rglob("*") if p.is_file() and p not in WRITTEN]:
        stale.unlink()


def on_config_inited(app: Sphinx, config: Config) -> None:
    generate()


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("config-inited", on_config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
