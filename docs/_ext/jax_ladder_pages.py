"""Write the site's generated pages (docs/_generated/, git-ignored) from the files
that hold each fact, when Sphinx starts: nothing here is a second copy.

- install.md and install-repository.md: the kit's install commands, with the repository's
  address from `[project.urls]` in pyproject.toml (its one home; conf.py puts it in the header);
- ladder.md, ladder.svg and ladder-phone.svg: the registry (jax_ladder.rungs.LADDER);
- recommend.md: the recommend table (questions, rules, notes), led by a
  plain-language table whose rungs the recommend engine itself picks;
- templates/<step>-<rung>.md: each template's README (its first sentence, the
  "Adapt it" and support tables) rendered with the defaults, its op's module,
  its benchmark plot with docs/benchmark.md's explanation, its cookiecutter.json
  (options and prompts) and its folder (the generated layout);
- examples/<name>.md: examples/<name>/README.md, and the ladder example's plot,
  drawn from its stored measurement (examples/ladder/results.json);
- cli.md: the argparse parser's help, command by command, with examples;
- changelog.md: CHANGELOG.md.

docs/index.md, docs/tutorial.md, docs/rungs/*.md and docs/architecture.md are
pages as they stand; each reference page gets a generated "See also" section
(its template, the neighbouring rungs, the JAX documentation it builds on).
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import itertools
import json
import os
import re
import shutil
import textwrap
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

from jax_ladder import cli
from jax_ladder.options import load_options, resolve
from jax_ladder.recommend import NOTES, QUESTIONS, RULES, page_path, recommend, render
from jax_ladder.recommend.records import Conditions
from jax_ladder.rungs import LADDER, Rung, available, by_name
from jax_ladder.versions import JAX_ON_PYTHON_OLDEST, PYTHON_OLDEST

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "_generated"
PROJECT = "{{cookiecutter.project_name}}"
PLACEHOLDERS = {"{{cookiecutter.package_name}}": "<package>", "{{cookiecutter.op_name}}": "<op>"}
# Sections of a template's README, between these markers, shown on its page.
SECTIONS = {
    "What you change": ("<!-- adapt-table", "<!-- /adapt-table -->"),
    "What it supports": ("<!-- support-table", "<!-- /support-table -->"),
}
# A template's measured benchmark plot (`benchmarks/bench.py --plot`) and the page
# that explains it, which its generated docs show too.
BENCH_PLOT = f"{PROJECT}/docs/benchmark.svg"
BENCH_PAGE = f"{PROJECT}/docs/benchmark.md"
TEMPLATE_FILL, NO_TEMPLATE_FILL, INK = "#dbe7fb", "#f2f2f2", "#1f2a44"
# The smallest text a picture may show, in CSS pixels (tests/test_site.py checks it).
MIN_TEXT_PX = 9

# The kit's addresses: one home, [project.urls] in pyproject.toml.
URLS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
REPOSITORY = URLS["Repository"]

# The JAX documentation each rung builds on, for its reference page's "See also".
JAX_DOCS = "https://docs.jax.dev/en/latest/"
JAX_PAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "plain-jax": (
        ("Quickstart", "quickstart.html"),
        ("Just-in-time compilation", "jit-compilation.html"),
        ("Automatic differentiation", "automatic-differentiation.html"),
        ("Automatic vectorization", "automatic-vectorization.html"),
    ),
    "transforms": (
        ("Control flow and logical operators with JIT", "control-flow.html"),
        ("jax.lax", "jax.lax.html"),
    ),
    "memory-and-sharding": (
        ("Gradient checkpointing", "gradient-checkpointing.html"),
        ("Introduction to parallel programming", "sharded-computation.html"),
        ("Manual parallelism with shard_map", "notebooks/shard_map.html"),
    ),
    "custom-vjp": (
        (
            "Custom derivative rules for JAX-transformable Python functions",
            "notebooks/Custom_derivative_rules_for_Python_code.html",
        ),
    ),
    "export": (
        ("Exporting and serializing staged-out computations", "export/export.html"),
        ("Shape polymorphism", "export/shape_poly.html"),
    ),
    "custom-partitioning": (
        ("jax.experimental.custom_partitioning", "jax.experimental.custom_partitioning.html"),
    ),
    "pallas": (
        ("Pallas: a JAX kernel language", "pallas/index.html"),
        ("Pallas quickstart", "pallas/quickstart.html"),
    ),
    "ffi": (("Foreign function interface (FFI)", "ffi.html"),),
    "internals": (
        ("JAX internals: primitives", "jax-primitives.html"),
        ("jax.extend", "jax.extend.html"),
    ),
}


# -- writing ---------------------------------------------------------------------------
WRITTEN: set[Path] = set()  # this build's files; generate() removes any other


def write(path: Path, text: str) -> None:
    """Write only what changed, so Sphinx rereads only the pages whose sources changed."""
    WRITTEN.add(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def copy_if_changed(source: Path, target: Path) -> None:
    WRITTEN.add(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)


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


def picture(path: str, alt: str, width: int, classes: str = "") -> str:
    """A MyST image shown `width` px wide at most (Furo shrinks it to the column) and
    linked to the full-size file, which Sphinx does for any image given a width."""
    lines = [f"```{{image}} {path}", f":alt: {alt}", f":width: {width}px"]
    if classes:
        lines.append(f":class: {classes}")
    return "\n".join(lines) + "\n```\n"


# -- the landing page: install, and the ladder -----------------------------------------
def template_page(rung: Rung) -> str:
    return f"templates/{rung.step}-{rung.name}"


def install_md() -> str:
    # What works today: jax-ladder has no release on the package index yet
    # (tests/test_docs.py holds every page to that until it has one).
    return (
        f"Python {PYTHON_OLDEST} or newer (on Python {PYTHON_OLDEST}, pip installs JAX "
        f"{JAX_ON_PYTHON_OLDEST}: newer JAX publishes no wheels for it). "
        "The kit installs from its repository (it is not on the "
        f"package index yet):\n\n```console\n$ pip install git+{REPOSITORY}\n```\n"
    )


def install_repository_md() -> str:
    return (
        f"Or from a clone of <{REPOSITORY}> (the source, its README, its issues), which "
        "also has the kit's own tests and demo:\n\n```console\n"
        f"$ git clone {REPOSITORY}\n$ pip install ./jax-ladder\n```\n"
    )


def rung_lines(rung: Rung, width: int) -> list[str]:
    """A rung's label: its name and summary, then how to start it, wrapped to `width`."""
    start = f"jax-ladder new {rung.name}" if rung.template else f"no template: {rung.instead}"
    first = textwrap.wrap(f"{rung.step}  {rung.name}: {rung.summary}", width)
    return first + textwrap.wrap(start, width)


def ladder_svg(width: int, chars: int, size: int) -> str:
    """The nine rungs, step 1 at the bottom, a filled rung where the kit has a template;
    each label wrapped to `chars` characters of `size` px text."""
    rail, pad, gap = 10, 10, 8
    labels = [rung_lines(rung, chars) for rung in reversed(LADDER)]
    body, y = [], gap
    for rung, lines in zip(reversed(LADDER), labels, strict=True):
        h = len(lines) * (size + 4) + 2 * pad
        fill = TEMPLATE_FILL if rung.template else NO_TEMPLATE_FILL
        dash = "" if rung.template else ' stroke-dasharray="5 4"'
        body.append(
            f'<rect x="{rail}" y="{y}" width="{width - 2 * rail}" height="{h}" rx="6" '
            f'fill="{fill}" stroke="{INK}"{dash}/>'
        )
        body.append(text_lines(rail + pad, y + pad + size, lines, size=size, bold_first=True))
        y += h + gap
    rails = [
        f'<line x1="{x}" y1="0" x2="{x}" y2="{y}" stroke="{INK}" stroke-width="4"/>'
        for x in (rail, width - rail)
    ]
    return svg(width, y, rails + body, "The ladder: nine rungs, step 1 at the bottom")


def ladder_md() -> str:
    """The picture, in two drawings: a wide one for desktops, a narrow one whose text
    stays readable on a phone (site.css shows one of them). Each links to itself."""
    alt = "The ladder: nine rungs, step 1 at the bottom; the ones with a template filled"
    return (
        "Climb only as far as you must: each rung buys control and costs code, tests and "
        "portability. The filled rungs have a template (`jax-ladder new RUNG`); the dashed "
        "ones are plain JAX, with no starter needed. Each rung has a reference page "
        "(*Reference pages* in the menu); click the picture to enlarge it.\n\n"
        + picture("/_generated/ladder.svg", alt, 760, "only-wide")
        + "\n"
        + picture("/_generated/ladder-phone.svg", alt, 360, "only-narrow")
    )


# -- "Which rung?": the recommend table ------------------------------------------------
# What a reader needs, in plain words, and the answers to `recommend`'s questions
# that say it: the engine picks the rung and the rule, so the table cannot disagree
# with the command.
NEEDS: tuple[tuple[str, dict[str, str]], ...] = (
    ("a program that jit, grad and vmap already handle (start here)", {}),
    ("the same function over a batch of independent examples", {"batch": "independent"}),
    ("a loop whose number of iterations depends on the data", {"loop": "data-dependent"}),
    ("gradients through such a loop", {"loop": "data-dependent", "gradients": "yes"}),
    ("a branch on array values", {"branch": "yes"}),
    ("less memory for the backward pass", {"gradients": "yes", "autodiff": "too-much-memory"}),
    ("to run on several devices, the compiler placing the communication", {"devices": "compiler"}),
    ("to write the collectives yourself, per device", {"devices": "explicit"}),
    (
        "a gradient that is NaN or wrong where the function is well behaved",
        {"gradients": "yes", "autodiff": "unstable"},
    ),
    (
        "a cheaper backward pass than autodiff's (a solver, a fixed point)",
        {"gradients": "yes", "autodiff": "too-slow"},
    ),
    ("to run it in another process or machine, without your Python code", {"ship": "serialize"}),
    (
        "an op that the partitioner all-gathers on sharded inputs",
        {"devices": "compiler", "gather": "yes"},
    ),
    ("a faster GPU or TPU kernel, where a profile shows XLA falls short", {"hotspot": "measured"}),
    (
        "a faster CPU kernel, where a profile shows XLA falls short",
        {"hotspot": "measured", "backend": "cpu"},
    ),
    ("to call an existing C++ or CUDA library on the hot path", {"library": "hot-path"}),
    ("a new primitive with its own transformation rules", {"internals": "new-primitive"}),
)
EXAMPLE_SESSION = {"gradients": "yes", "autodiff": "unstable"}


def answers(chosen: dict[str, str]) -> dict[str, str]:
    """Every question's answer: the chosen ones, the defaults for the rest."""
    return {q.key: q.default for q in QUESTIONS} | chosen


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.:])\s+(?=[A-Z])", text.strip(), maxsplit=1)[0]


def rung_links(rung: Rung, prefix: str) -> str:
    """The rung's reference page and, where it has one, its template page: Markdown
    links from a page at `prefix` below docs/ (e.g. "../" from _generated/)."""
    page = f"[{rung.step}. {rung.name}]({prefix}{page_path(rung).removeprefix('docs/')})"
    if not rung.template:
        return page
    return f"{page} ([template]({prefix}_generated/{template_page(rung)}.md))"


def recommend_page() -> str:
    plain = []
    for need, chosen in NEEDS:
        rec = recommend(answers(chosen))
        plain.append(
            (
                need,
                f"{rung_links(rec.rung, '../')}: `{rec.rule.use}`",
                first_sentence(rec.rule.why),
            )
        )
    session = " ".join(f"--answer {k}={v}" for k, v in EXAMPLE_SESSION.items())
    example = render(recommend(answers(EXAMPLE_SESSION)))
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
        "Climb only as far as you must. Find what you need below: the rung is the lowest "
        "that meets it (each links its reference page and, where the kit has one, its "
        "template). Needing two things? The higher rung wins, and the other need's tool is "
        "used inside it. [`jax-ladder recommend`](cli.md#recommend) asks the questions and "
        "applies the same rules; the [tutorial](../tutorial.md) walks through a session.\n\n"
        + table(("you need", "rung: what to use", "because"), plain)
        + "\n## An example session\n\n"
        "A gradient that is NaN where the function is fine (say, a distance at zero):\n\n"
        f"```console\n$ jax-ladder recommend --no-input {session}\n{example}\n```\n"
        "\n## The machine rules\n\n"
        "What `recommend` applies, as data (`src/jax_ladder/recommend/`): each rule names "
        "the lowest rung that meets one need; the recommendation is the highest rung among "
        "the rules that match (the first listed within a rung), and the other matching rules "
        "are mechanisms to use inside it. Open a list to read it.\n\n"
        + folded(
            f"The questions ({len(QUESTIONS)}), asked in this order; the first choice is the "
            "default",
            table(("key", "question", "choices", "asked when"), questions),
        )
        + folded(f"The rules ({len(RULES)})", table(("rule", "rung", "when", "use", "why"), rules))
        + folded(
            f"The notes ({len(NOTES)}), caveats printed beside a recommended rung",
            table(("note", "rungs", "when", "text"), notes),
        )
    )


def folded(summary: str, body: str) -> str:
    """A block the reader opens: an HTML <details> around Markdown."""
    return f"<details>\n<summary>{esc(summary)}</summary>\n\n{body}\n</details>\n\n"


def conditions(when: Conditions) -> str:
    return " and ".join(f"{k}={'/'.join(v)}" for k, v in when.items()) or "otherwise (fallback)"


# -- one page per template -------------------------------------------------------------
def template_context(template: Path) -> dict[str, object]:
    """The options with their defaults, and the private keys (_jax_spec) a file may name."""
    raw = json.loads((template / "cookiecutter.json").read_text())
    context = {k: v for k, v in raw.items() if k.startswith("_")}
    return context | resolve(load_options(template), {})


def rendered(template: Path, relative: str) -> str:
    """A template file rendered with the default options, as `jax-ladder new` writes it."""
    from cookiecutter.environment import StrictEnvironment

    source = (template / PROJECT / relative).read_text()
    text = StrictEnvironment(keep_trailing_newline=True).from_string(source)
    return text.render(cookiecutter=template_context(template))


def unlink_local(markdown: str) -> str:
    """Links to the project's own files lead nowhere here: keep their text."""
    return re.sub(r"\[([^\]]+)\]\((?!https?:|#)[^)]+\)", r"\1", markdown)


def once(cell_text: str) -> str:
    """A support-table cell with each "; "-separated clause said once."""
    clauses = [c.strip() for c in cell_text.split(";")]
    return "; ".join(dict.fromkeys(clauses))


def readme_sections(template: Path) -> dict[str, str]:
    """The marked sections of the template's README, rendered with the default options."""
    readme = rendered(template, "README.md")
    found = {}
    for title, (start, end) in SECTIONS.items():
        if start in readme and end in readme:
            body = readme.split(start, 1)[1].split("-->", 1)[1].split(end, 1)[0].strip()
            rows = [
                "| " + " | ".join(once(c) for c in line.strip("|").split(" | ")) + " |"
                if line.startswith("|")
                else line
                for line in body.splitlines()
            ]
            found[title] = unlink_local("\n".join(rows))
    return found


def fold_machinery(adapt_table: str) -> str:
    """The adapt table's files to edit or delete, then its machinery (the files to
    leave), folded: a reader comes for the first."""
    lines = adapt_table.splitlines()
    head, rows = lines[:2], lines[2:]
    machinery = [row for row in rows if "| machinery (leave) |" in row]
    yours = [row for row in rows if row not in machinery]
    return (
        "\n".join(head + yours)
        + "\n\n"
        + folded(
            f"The machinery: {len(machinery)} files and folders to leave as they are",
            "\n".join(head + machinery) + "\n",
        )
    )


def starter_sentence(template: Path) -> str:
    """What the starter op is, in one sentence: the README's, after its title."""
    readme = rendered(template, "README.md")
    paragraph = readme.split("\n\n")[1]
    return unlink_local(first_sentence(" ".join(paragraph.split())))


def op_module(template: Path) -> tuple[str, str]:
    """The op's module (the file `jax-ladder new` writes as src/<package>/<op>.py), as
    (its path in the generated project, its text with the default options)."""
    context = template_context(template)
    op = f"src/{context['package_name']}/{context['op_name']}.py"
    module = "src/{{cookiecutter.package_name}}/{{cookiecutter.op_name}}.py"
    if not (template / PROJECT / module).is_file():
        # The internals template keeps one module per `api` choice, which its
        # post-generation hook moves into place.
        module = f"_api/{context['api']}.py"
    return op, rendered(template, module)


def bench_section(rung: Rung, template: Path) -> str:
    """The measured plot, one panel under the other, each readable and linked to its
    full-size drawing, with the explanation of the project's docs/benchmark.md in place
    of its own image."""
    plot = template / BENCH_PLOT
    if not plot.is_file():
        return ""
    name = f"{rung.step}-{rung.name}-bench"
    image = panel_pictures(plot, name, f"{rung.name}'s measured benchmark")
    page = rendered(template, BENCH_PAGE.removeprefix(f"{PROJECT}/"))
    body = page.split("\n", 1)[1].strip()  # without its title
    # The page's own image (a MyST directive, or a Markdown image on a line of its
    # own) becomes the panels; links to the project's files lose their target.
    mark = "<!-- the panels -->"
    body = re.sub(
        r"```\{image\} benchmark\.svg\n.*?```\n|^!\[[^\]]*\]\(benchmark\.svg\)$",
        mark,
        body,
        count=1,
        flags=re.DOTALL | re.MULTILINE,
    )
    # A plot measured on an accelerator (docs/benchmark-tpu.svg), in panels too.
    tpu, tpu_mark = template / BENCH_PLOT.replace(".svg", "-tpu.svg"), "<!-- the TPU plot -->"
    tpu_image = re.search(r"^!\[[^\]]*\]\(benchmark-tpu\.svg\)$", body, re.MULTILINE)
    if tpu.is_file() and tpu_image:
        body = body.replace(tpu_image[0], tpu_mark)
    body = unlink_local(body if mark in body else f"{mark}\n\n{body}").replace(mark, image)
    if tpu_mark in body:
        what = f"{rung.name}'s benchmark on a TPU"
        body = body.replace(tpu_mark, panel_pictures(tpu, f"{name}-tpu", what))
    return f"## Benchmark\n\nFrom the project's `docs/benchmark.md`.\n\n{body}\n"


def panel_pictures(plot: Path, name: str, what: str) -> str:
    """A measured plot as its panels, one under the other, each readable and linked
    to its full-size drawing, then a line on where it was measured."""
    copy_if_changed(plot, OUT / "templates" / f"{name}.svg")
    drawing = plot.read_text()
    note = re.search(r"<dc:description>(.*?)</dc:description>", drawing)
    pictures = []
    for i, (panel, title) in enumerate(split_panels(drawing)):
        write(OUT / "templates" / f"{name}-{i}.svg", panel)
        width = readable_width(OUT / "templates" / f"{name}-{i}.svg")
        alt = f"{what}: {title}"
        pictures.append(
            f"````{{container}} plot-scroll\n{picture(f'{name}-{i}.svg', alt, width)}````\n"
        )
    measured = f"Measured on {html.unescape(note[1])}. " if note else ""
    return (
        "\n".join(pictures)
        + f"\n{measured}Click a panel to open it alone; both side by side, as the "
        f"project's docs show them: [the whole drawing]({name}.svg).\n"
    )


def split_panels(drawing: str) -> list[tuple[str, str]]:
    """A matplotlib drawing of panels side by side (benchmarks/plot.py's write_plot) as
    one drawing per panel, with its title: the same SVG with the viewBox on that panel,
    cut halfway between one panel's axes and the next, and without the footnote (the
    page says it in words). Side by side, the panels are too small to read in a page's
    column."""
    view = re.search(
        r'width="([\d.]+)pt" height="([\d.]+)pt" viewBox="0 0 ([\d.]+) ([\d.]+)"', drawing
    )
    assert view, "not a matplotlib SVG"
    width, height = float(view[3]), float(view[4])
    # Each panel's axes box: the first path of its group, "M left bottom L right bottom ...".
    boxes = [
        (float(m[1]), float(m[2]))
        for m in re.finditer(
            r'<g id="axes_\d+">\s*<g id="patch_\d+">\s*<path d="M ([\d.]+) [\d.]+\s*L ([\d.]+)',
            drawing,
        )
    ]
    # Cut just left of the next panel's y label (rotated text, drawn up from its x).
    ylabels = [
        float(x) for x in re.findall(r'<g id="panel\d+:ylabel">\s*<text [^>]*x="([\d.]+)"', drawing)
    ]
    cuts = [0.0]
    for i, ((_, right), (left, _)) in enumerate(itertools.pairwise(boxes)):
        label = ylabels[i + 1] - 12 if i + 1 < len(ylabels) else (right + left) / 2
        cuts.append(max(right + 2, min(label, (right + left) / 2)))
    cuts.append(width)
    note = re.search(r"<dc:description>(.*?)</dc:description>", drawing)
    if note:
        drawing = re.sub(
            rf'\s*<g id="text_\d+">\s*<text [^>]*>{re.escape(note[1])}</text>\s*</g>', "", drawing
        )
    titles = [
        html.unescape(t)
        for t in re.findall(
            r'<g id="panel\d+:title">.*?<text [^>]*>(.*?)</text>', drawing, re.DOTALL
        )
    ]
    panels = []
    for i, (x0, x1) in enumerate(itertools.pairwise(cuts)):
        w = x1 - x0
        root = f'width="{w:.2f}pt" height="{height}pt" viewBox="{x0:.2f} 0 {w:.2f} {height}"'
        panels.append((drawing.replace(view[0], root, 1), titles[i] if i < len(titles) else ""))
    return panels


def readable_width(svg_path: Path) -> int:
    """The width (CSS px) at which the drawing's smallest text is MIN_TEXT_PX tall."""
    text = svg_path.read_text()
    view = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', text)
    assert view, svg_path
    sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", text)]
    sizes += [float(s) for s in re.findall(r'font-size="([\d.]+)"', text)]
    return round(float(view[1]) * MIN_TEXT_PX / min(sizes)) + 1


def template_md(rung: Rung) -> str:
    assert rung.template
    template = ROOT / "templates" / rung.template
    options = [
        (f"`{o.key}`", "derived" if o.derived else f"`{o.default}`", ", ".join(o.choices), o.prompt)
        for o in load_options(template).values()
    ]
    op_path, op_code = op_module(template)
    parts = [
        f"# {rung.name} (rung {rung.step})\n\n"
        f"{starter_sentence(template)} When to use the rung: "
        f"[{rung.step}. {rung.name}](../../{page_path(rung).removeprefix('docs/')}); "
        f"its neighbours and the rest: [Which rung?](../recommend.md).\n\n"
        f"```console\n$ jax-ladder new {rung.name}\n```\n",
        f"## The starter op\n\n`{op_path}`, as `jax-ladder new {rung.name}` writes it with the "
        "default options (scroll the box for the whole file):\n\n"
        f"````{{code-block}} python\n:class: op-source\n{op_code}````\n",
    ]
    sections = readme_sections(template)
    if "What you change" in sections:
        sections["What you change"] = fold_machinery(sections["What you change"])
    parts += [
        f"## {title}\n\nFrom the generated README, with the default options.\n\n{body}\n"
        for title, body in sections.items()
    ]
    parts.append(bench_section(rung, template))
    parts += [
        "## Options\n\nFrom the template's `cookiecutter.json`: the prompt is what "
        "`jax-ladder new` asks; `--set KEY=VALUE` answers it.\n\n"
        + table(("option", "default", "choices", "prompt"), options),
        "## Generated layout\n\nThe template's files, before its post-generation hook picks "
        "the files an option chooses; `<package>` and `<op>` are the package and op names.\n\n"
        + folded("The template's files", layout(template)),
    ]
    return "\n".join(p for p in parts if p)


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


# -- the reference pages' "See also" ---------------------------------------------------
def see_also(rung: Rung) -> str:
    """Links from a reference page (docs/rungs/) to its template page, the rungs
    below and above it, and the JAX documentation it builds on."""
    lines = ["", "## See also", ""]
    if rung.template:
        lines.append(
            f"- The template's page: [{rung.name}](../_generated/{template_page(rung)}.md)"
            " (the starter op, what you change, what it supports, its benchmark)."
        )
    else:
        lines.append(f"- No template: this rung is plain JAX ({rung.instead}).")
    below, above = by_step(rung.step - 1), by_step(rung.step + 1)
    if below:
        lines.append(
            f"- The rung below: [{below.step}. {below.name}]({below.step}-{below.name}.md)."
        )
    if above:
        lines.append(
            f"- The rung above: [{above.step}. {above.name}]({above.step}-{above.name}.md)."
        )
    lines.append("- [Which rung?](../_generated/recommend.md): every rung by what you need.")
    docs = ", ".join(f"[{title}]({JAX_DOCS}{path})" for title, path in JAX_PAGES[rung.name])
    lines.append(f"- In JAX's documentation: {docs}.")
    return "\n".join(lines) + "\n"


def by_step(step: int) -> Rung | None:
    return next((r for r in LADDER if r.step == step), None)


def on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    match = re.fullmatch(r"rungs/(\d)-([\w-]+)", docname)
    if match:
        rung = by_name(match[2])
        assert rung is not None, docname
        source[0] += see_also(rung)


# -- the worked examples ---------------------------------------------------------------
def example_md(folder: Path, out: Path) -> str:
    source = f"{REPOSITORY}/tree/main/examples/{folder.name}"
    rung = by_name(folder.name)
    where = f"The code: [`examples/{folder.name}`]({source}) in the repository"
    if rung is not None:
        where += f"; the rung: {rung_links(rung, '../../')}"
    page = f"```{{include}} ../../../examples/{folder.name}/README.md\n```\n\n{where}.\n"
    results = folder / "results.json"
    if results.is_file():
        plot = load_module(folder / "plot.py")
        measured = plot.load(results)
        drawing = out / "examples" / f"{folder.name}.svg"
        plot.plot(measured, drawing)
        WRITTEN.add(drawing)
        load = f", load average {measured['load_average']}" if "load_average" in measured else ""
        alt = "bench.py's table, drawn"
        page += (
            "\n## The table as a picture\n\n"
            f"`bench.py --plot` from the stored measurement (`results.json`): "
            f"{measured['machine']}, jax {measured['jax']}, {measured['date']}{load}.\n\n"
            f"````{{container}} plot-scroll\n"
            f"{picture(f'{folder.name}.svg', alt, readable_width(drawing))}"
            "````\n"
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
# Examples of each command (tests/test_site.py parses every one with the CLI's parser).
CLI_EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "list": (("jax-ladder list", "the nine rungs, and which have templates"),),
    "new": (
        ("jax-ladder new custom-vjp", "asks for each option"),
        ("jax-ladder new custom-vjp --help", "the template's options, choices and defaults"),
        (
            "jax-ladder new custom-vjp --name my-op --set rule=jvp --no-input",
            "no questions: defaults and --set",
        ),
        (
            "jax-ladder new ffi --name my-softmax --set op_name=softmax --set example=none "
            "--no-input",
            "the machinery around an identity op, to make your own",
        ),
    ),
    "demo": (("jax-ladder demo --output-dir /tmp/ladder-demo", "every rung's quick tests"),),
    "update": (
        ("jax-ladder update --check", "in CI: exit 1 when the project is behind"),
        ("jax-ladder update --diff", "what the template changed since generation"),
        ("jax-ladder update", "merge it in (commit your work first)"),
    ),
    "recommend": (
        ("jax-ladder recommend", "asks the questions that decide the rung"),
        (
            "jax-ladder recommend --no-input --answer loop=data-dependent --answer gradients=yes",
            "answers given, the rest defaulted",
        ),
        ("jax-ladder recommend --list-questions", "every question, its choices and default"),
    ),
    "doctor": (("jax-ladder doctor", "what works here, and known problems"),),
    "locate": (
        ("jax-ladder locate shard_map", "where a concept lives in the installed JAX"),
        ("jax-ladder locate custom_partitioning --repo ~/src/jax", "and in a JAX checkout"),
    ),
    "opcheck": (
        ("jax-ladder opcheck tests/softplus_spec.py", "every op the declaration file declares"),
        (
            "jax-ladder opcheck tests/softplus_spec.py::SPEC --cells 'eager,jit,grad-*' --seed 3",
            "one op, a few cells, another seed",
        ),
        (
            "jax-ladder opcheck tests/softplus_spec.py --json report.json --junit junit.xml",
            "the reports as data, and for a CI's test view",
        ),
        (
            "jax-ladder opcheck mypkg.ops:rms_norm --signature 'x[b,n], w[n] -> [b,n]'",
            "no declaration: the op against itself in float64",
        ),
        ("jax-ladder opcheck tests/softplus_spec.py --list", "the cells' names"),
    ),
}


def cli_md() -> str:
    columns = os.environ.get("COLUMNS")
    # argparse wraps to the terminal's width; fix it at what a page's column shows.
    os.environ["COLUMNS"] = "78"
    try:
        parser = cli._parser()
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parts = [
            "# Command line\n\n",
            "`jax-ladder COMMAND` (or `python -m jax_ladder COMMAND`); each command's "
            "`--help` prints what its section shows. New to the kit? Start with the "
            "[tutorial](../tutorial.md).\n\n",
            f"```text\n{parser.format_help()}```\n",
        ]
        for name, command in sub.choices.items():
            examples = "\n".join(f"# {why}\n{line}" for line, why in CLI_EXAMPLES[name])
            parts.append(
                f"\n## {name}\n\n```bash\n{examples}\n```\n\n```text\n{command.format_help()}```\n"
            )
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "".join(parts)


def changelog_md() -> str:
    return (
        "```{include} ../../CHANGELOG.md\n```\n\n"
        f"Each release's code: the repository's [tags]({REPOSITORY}/tags). Take a release "
        "into a generated project with `jax-ladder update` ([command line](cli.md#update)).\n"
    )


# -- Sphinx ----------------------------------------------------------------------------
def generate(out: Path = OUT) -> None:
    pages: dict[str, Callable[[], str]] = {
        "install.md": install_md,
        "install-repository.md": install_repository_md,
        "ladder.md": ladder_md,
        "ladder.svg": lambda: ladder_svg(760, 88, 13),
        "ladder-phone.svg": lambda: ladder_svg(360, 38, 13),
        "recommend.md": recommend_page,
        "cli.md": cli_md,
        "changelog.md": changelog_md,
    }
    for name, make in pages.items():
        write(out / name, make())
    for rung in available():
        write(out / f"{template_page(rung)}.md", template_md(rung))
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
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
