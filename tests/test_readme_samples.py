"""The sample outputs of README.md (the demo) and docs/using.md (list, recommend,
doctor) are what the commands print (scripts/readme-samples writes them):
exactly, where the output is the same on every machine; for the doctor and demo
samples, the lines and shape that do not depend on the machine. No demo runs
here: its table's shape comes from the code that prints it, and each row's count
of passed tests from a real run of the same selection in test_templates.py (the
default combination's own tests)."""

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, load_script

from jax_ladder.commands import demo
from jax_ladder.rungs import LADDER, available

RUNG_ROW = re.compile(r"^[* ] \d\. \S+")
FACT_LABEL = re.compile(r"^([a-z]+) {2,}\S")


samples = load_script("readme-samples")
# Each sample's body, from the page that shows it.
SHOWN = {page: samples.blocks((REPO / page).read_text()) for page in samples.PAGES}
SAMPLE = {name: SHOWN[sample.page][name] for name, sample in samples.SAMPLES.items()}
REFRESH = "stale: run scripts/readme-samples --only {}"


def doctor_skeleton(text):
    """The doctor lines that do not depend on the machine: the title, each fact's
    label, the rung table's heading and each row's rung, up to the known problems."""
    kept = []
    for line in text.splitlines():
        if line.startswith("Known problems") or line.startswith("The kit "):
            break
        if line.startswith(("jax-ladder ", "Rungs here")):
            kept.append(line)
        elif row := RUNG_ROW.match(line):
            kept.append(row[0])
        elif (label := FACT_LABEL.match(line)) and label[1] not in kept[-1:]:
            kept.append(label[1])
    return kept


def test_every_sample_has_one_block_in_its_page_and_none_elsewhere():
    for page in samples.PAGES:
        names = [m["name"] for m in samples.BLOCK.finditer((REPO / page).read_text())]
        expected = [n for n, sample in samples.SAMPLES.items() if sample.page == page]
        assert sorted(names) == sorted(expected), page


@pytest.mark.parametrize("name", [n for n, s in samples.SAMPLES.items() if s.exact])
def test_an_exact_sample_is_what_the_command_prints_now(name):
    assert SAMPLE[name] == samples.run(name), REFRESH.format(name)


def test_the_doctor_sample_has_the_machine_independent_lines_of_the_real_output():
    shown = doctor_skeleton(SAMPLE["doctor"])
    assert shown[0].startswith("jax-ladder ")
    assert len([line for line in shown if RUNG_ROW.match(line)]) == len(LADDER)
    assert shown == doctor_skeleton(samples.run("doctor")), REFRESH.format("doctor")


def demo_sample_passed() -> dict[str, int]:
    """Each rung's passed count in the README's demo sample: what its default
    project's quick selection passes (test_templates.py holds it to a real run)."""
    rows = SAMPLE["demo"].splitlines()[2:-1]
    return {row.split()[0]: int(row.split()[2]) for row in rows}


def test_the_demo_sample_is_the_real_table_with_one_row_per_template_in_order(capsys):
    demo.print_table([])  # the header and rule the demo prints above its rows
    header, rule = capsys.readouterr().out.strip("\n").splitlines()
    lines = SAMPLE["demo"].splitlines()
    assert lines[:2] == [header, rule], REFRESH.format("demo")
    rows, total = lines[2:-1], lines[-1]
    assert [row.split()[0] for row in rows] == [rung.name for rung in available()]
    assert re.fullmatch(rf"{len(rows)} rung\(s\) in \d+ s", total), total
    assert all(len(row) == len(header) for row in rows), "columns out of line with the header"
    assert all(row.split()[1] == "ok" for row in rows), "a sample with a failed rung"


def test_the_ladder_table_says_what_the_kit_has_for_each_rung():
    """The README's ladder table, row by row, against the registry and the
    assets/ and examples/ folders: a template where the rung has one, "asset" or
    "assets" by the number of single-file starters, "example" where
    examples/<rung>/ exists, else a dash."""
    text = (REPO / "README.md").read_text()
    table = text[text.index("## The ladder") :].split("\n\n")[1].splitlines()[2:]
    rows = {cells[1]: cells[3] for cells in (row.strip("| ").split(" | ") for row in table)}
    assert list(rows) == [rung.name for rung in LADDER]
    for rung in LADDER:
        starters = list((REPO / "assets" / rung.name).glob("*.py"))
        has = [
            "template" * bool(rung.template),
            "asset" + "s" * (len(starters) > 1) if starters else "",
            "example" * (REPO / "examples" / rung.name).is_dir(),
        ]
        assert rows[rung.name] == (", ".join(filter(None, has)) or "–"), rung.name


# -- the site's tutorial (docs/tutorial.md) and landing page (docs/index.md) -------------
site_samples = load_script("site-samples")
SITE_REFRESH = "stale: run scripts/site-samples"


@pytest.fixture(scope="module")
def tutorial_session():
    """The tutorial's session, run once: each step's block as it would be written now."""
    return site_samples.run_session()


def test_every_tutorial_step_has_one_block_and_every_block_a_step():
    shown = site_samples.blocks(site_samples.PAGES[0].read_text())
    assert list(shown) == [step.name for step in site_samples.STEPS]
    landing = site_samples.blocks(site_samples.PAGES[1].read_text())
    assert list(landing) == ["new"]
    assert landing["new"] == shown["new"], SITE_REFRESH


@pytest.mark.slow
def test_the_tutorial_shows_what_its_commands_print(tutorial_session):
    """Every command of the tutorial runs, in order, in one folder; each block shows
    what it printed (timings and measured numbers masked)."""
    for page in site_samples.PAGES:
        for name, body in site_samples.blocks(page.read_text()).items():
            assert site_samples.masked(body) == site_samples.masked(tutorial_session[name]), (
                f"{page.name}, block {name}: {SITE_REFRESH}"
            )


def test_the_readme_opcheck_declaration_passes_the_cells_it_shows(tmp_path):
    """The README's opcheck declaration, with a softplus of the user's own in
    `my_package`, passes a cell of each kind it claims (values, vmap, gradients
    to second order, shard_map) through the command it names."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Checking an op in your own repository") :]
    declaration = re.search(r"```python\n(.*?)```", section, re.S)[1]
    (tmp_path / "softplus_spec.py").write_text(declaration)
    (tmp_path / "my_package.py").write_text(
        "import jax.numpy as jnp\n\n\ndef softplus(x):\n    return jnp.logaddexp(x, 0.0)\n"
    )
    cells = "eager,jit,vmap-new-axis,grad-x,check-grads-2,shard-map-b-1d,grad-grad-explicit-b"
    run = subprocess.run(
        [sys.executable, "-m", "jax_ladder", "opcheck", "softplus_spec.py", "--cells", cells],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 cells: 7 passed" in run.stdout, run.stdout
