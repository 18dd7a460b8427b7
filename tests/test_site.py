"""The kit's documentation site (docs/, `nox -s docs`) in a real browser.

Builds the site with warnings as errors (once per session), serves it on the
loopback address and opens every page in headless Chromium (Debian's `chromium`,
driven by Playwright without Playwright's own browsers). A page fails on a
console error, an image that does not load, or a link to a page or anchor of the
site that does not exist; the search page must find "custom_vjp". As a reader
sees them, on a desktop (1280 px wide) and a phone (390 px): every page body has
a link; at 390 px no element's content is clipped without a scroll bar; every
picture's text is drawn at 9 px or more; the landing page's first screen holds
the install command. Screenshots of the landing, tutorial, "Which rung?" and one
template page at both widths go to $JAX_LADDER_SCREENSHOTS (default: a
temporary folder).
"""

import functools
import html
import http.server
import importlib.util
import os
import re
import subprocess
import sys
import threading
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = (
    "the site test needs Debian's chromium at /usr/bin/chromium (as root: apt-get install "
    "chromium; .ci/run does this in CI) and Playwright (pip install -e '.[test]')"
)
SCREENSHOTS = {
    "landing": "index.html",
    "tutorial": "tutorial.html",
    "which-rung": "_generated/recommend.html",
    "template": "_generated/templates/4-custom-vjp.html",
}
DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
# Sphinx's own pages, with no body of the site's.
NOT_CONTENT = ("search.html", "genindex.html")
MIN_TEXT_PX = 9
# What the landing page leads with: the install that works today (tests/test_docs.py).
INSTALL_COMMAND = (
    "pip install git+"
    + tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
)
SEARCH = "custom_vjp"
# As `nox -s docs` runs it: warnings are errors.
SPHINX = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]

# What each page reports back: console errors, broken images, and every link.
PAGE_FACTS = """() => ({
  images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                              .map(i => i.currentSrc || i.src),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
})"""


def _missing(reason):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the site test must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright_api():
    if not CHROMIUM.is_file():
        _missing(INSTALL)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing(INSTALL)
    return sync_playwright


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as `nox -s docs` builds it (-W), into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [*SPHINX, "-d", str(out / "doctrees"), str(REPO / "docs"), str(out / "html")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out / "html"


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for key, value in attrs if key in ("id", "name") and value)


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    parser = _Ids()
    parser.feed(page.read_text())
    return frozenset(parser.ids)


def broken_link(site: Path, base: str, href: str) -> str | None:
    """Why an internal link is broken, or None (external links are not followed)."""
    if not href.startswith(base):
        return None
    parts = urlsplit(href)
    target = site / unquote(parts.path).lstrip("/")
    if target.is_dir():
        target /= "index.html"
    if not target.is_file():
        return f"{href}: no such page"
    if parts.fragment and target.suffix == ".html" and parts.fragment not in anchors(target):
        return f"{href}: no anchor #{parts.fragment}"
    return None


def check_page(page, site, base, url):
    """Open url; every problem found on it, as a list of lines."""
    errors = []
    page.on(
        "console",
        lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on(
        "response",
        lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.goto(url, wait_until="load")
    facts = page.evaluate(PAGE_FACTS)
    errors += [f"image does not load: {src}" for src in facts["images"]]
    errors += filter(None, (broken_link(site, base, href) for href in set(facts["links"])))
    return [f"{url}: {e}" for e in errors]


@pytest.fixture(scope="module")
def browser(playwright_api):
    with playwright_api() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_every_page_loads_with_no_console_error_broken_image_or_broken_link(browser, site, server):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert "index.html" in pages, pages
    assert len(pages) > 20, pages
    context = browser.new_context()
    problems = []
    for name in pages:
        page = context.new_page()
        problems += check_page(page, site, server, server + name)
        page.close()
    context.close()
    assert not problems, "\n".join(problems)


# Elements of the page's body whose content is wider than their box and cut off
# (overflow hidden or clip), and whether the page itself is wider than the window.
CLIPPED = """() => {
  const clipped = [];
  for (const el of document.querySelectorAll('article[role=main] *')) {
    if (el.offsetParent === null || el.clientWidth === 0) continue;  // not shown
    const overflow = getComputedStyle(el).overflowX;
    if (el.scrollWidth > el.clientWidth + 1 && (overflow === 'hidden' || overflow === 'clip')) {
      clipped.push(`${el.tagName.toLowerCase()}.${el.className}: ${el.scrollWidth}px of content `
                   + `in ${el.clientWidth}px: ${el.textContent.trim().slice(0, 60)}`);
    }
  }
  const page = document.documentElement.scrollWidth;
  if (page > window.innerWidth) clipped.push(`the page is ${page}px wide`);
  return clipped;
}"""
# Each picture shown (not hidden by a media query): its file and drawn width.
SHOWN_IMAGES = """() => [...document.querySelectorAll('article[role=main] img')]
  .filter(i => i.offsetParent !== null && i.getBoundingClientRect().width > 0)
  .map(i => ({src: i.currentSrc || i.src, width: i.getBoundingClientRect().width}))"""
BODY_LINKS = """() => [...document.querySelectorAll('article[role=main] a[href]')]
  .filter(a => !a.classList.contains('headerlink')).length"""


def smallest_text(svg_text: str) -> float:
    """The smallest font size in an SVG drawing, in its own units (text drawn as
    text: the site's drawings and matplotlib's with svg.fonttype none)."""
    sizes = re.findall(r'font-size(?:="|:\s*)([\d.]+)', svg_text)
    assert sizes, "no text size in the drawing (text drawn as paths cannot be checked)"
    return min(float(size) for size in sizes)


def text_too_small(site: Path, base: str, image: dict) -> str | None:
    src = image["src"]
    assert src.startswith(base), src
    path = site / unquote(urlsplit(src).path).lstrip("/")
    if path.suffix != ".svg":
        return f"{src}: not an SVG, its text size cannot be checked"
    text = path.read_text()
    view = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', text)
    assert view, path
    px = smallest_text(text) * image["width"] / float(view[1])
    return None if px >= MIN_TEXT_PX else f"{src}: text {px:.1f} px at {image['width']:.0f} px wide"


@pytest.fixture(scope="module")
def pages(site):
    return sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name not in NOT_CONTENT
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_page_as_a_reader_sees_it(browser, site, server, pages, viewport):
    """A link in every page's body; at 390 px nothing clipped without a scroll bar;
    every picture's text at 9 px or more where it is drawn."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    problems = []
    for name in pages:
        page.goto(server + name, wait_until="load")
        if page.evaluate(BODY_LINKS) == 0:
            problems.append(f"{name}: no link in the page's body")
        if viewport is PHONE:
            problems += [f"{name}: {c}" for c in page.evaluate(CLIPPED)]
        for image in page.evaluate(SHOWN_IMAGES):
            if small := text_too_small(site, server, image):
                problems.append(f"{name}: {small}")
    context.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_landing_pages_first_screen_has_the_install_command(browser, server, viewport):
    page = browser.new_page(viewport=viewport)
    page.goto(server + "index.html", wait_until="load")
    block = page.locator("article[role=main] pre", has_text=INSTALL_COMMAND).first
    box = block.bounding_box()
    page.close()
    assert box is not None, f"the landing page has no {INSTALL_COMMAND!r} block"
    assert box["y"] + box["height"] <= viewport["height"], (
        f"{INSTALL_COMMAND!r} ends at {box['y'] + box['height']:.0f} px, below the first "
        f"screen ({viewport['height']} px)"
    )


def test_search_finds_custom_vjp(browser, server):
    page = browser.new_page()
    page.goto(f"{server}search.html?q={SEARCH}", wait_until="load")
    page.wait_for_function(
        "document.querySelector('#search-results p.search-summary') !== null", timeout=20_000
    )
    found = page.locator("#search-results ul.search li").count()
    summary = page.locator("#search-results p.search-summary").inner_text()
    page.close()
    assert found > 0, f"searching {SEARCH!r} found nothing: {summary}"


def test_screenshots_at_both_widths(browser, server, tmp_path):
    """The first screen and the whole page, on a desktop and on a phone."""
    folder = Path(os.environ.get("JAX_LADDER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = browser.new_page(viewport=viewport)
        for name, path in SCREENSHOTS.items():
            page.goto(server + path, wait_until="load")
            for whole in (False, True):
                shot = folder / f"site-{name}-{label}{'-full' if whole else ''}.png"
                page.screenshot(path=str(shot), full_page=whole)
                assert shot.stat().st_size > 10_000, shot
                print(f"screenshot: {shot}")
        page.close()


def test_the_ladder_plot_draws_every_rung_of_the_stored_measurement(tmp_path):
    """What the site shows for examples/ladder: `bench.py --plot`'s drawing of results.json."""
    pytest.importorskip("matplotlib", reason="pip install matplotlib (the test extra has it)")
    spec = importlib.util.spec_from_file_location("ladder_plot", REPO / "examples/ladder/plot.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    results = plot.load(REPO / "examples/ladder/results.json")
    assert results["machine"], results
    assert results["date"], results
    plot.plot(results, tmp_path / "ladder.svg")
    text = html.unescape((tmp_path / "ladder.svg").read_text())
    for label in (*plot.AXES, *(row["rung"] for row in results["rows"])):
        assert f">{label}<" in text, label


def test_every_template_page_shows_its_measured_benchmark(site):
    """Issue 27: each template's page carries its `bench.py --plot` drawing (the
    page test above checks that the image loads)."""
    from jax_ladder.rungs import available

    for rung in available():
        (page,) = site.rglob(f"templates/{rung.step}-{rung.name}.html")
        assert f"{rung.step}-{rung.name}-bench.svg" in page.read_text(), page


def test_every_command_has_examples_on_the_cli_page_and_each_parses():
    import shlex

    from jax_ladder import cli

    sys.path.insert(0, str(REPO / "docs" / "_ext"))
    import jax_ladder_pages

    assert set(jax_ladder_pages.CLI_EXAMPLES) == set(cli.COMMANDS)
    parser = cli._parser()
    refused = []
    for command, examples in jax_ladder_pages.CLI_EXAMPLES.items():
        for line, _ in examples:
            words = shlex.split(line)
            assert words[:2] == ["jax-ladder", command], line
            try:
                parser.parse_args(words[1:])
            except SystemExit as done:  # a --help prints and exits 0
                if done.code != 0:
                    refused.append(line)
    assert not refused, refused


# What each template's measured plot puts on its x axis, by the kind of work it
# measures, so that plots side by side on the site compare like with like: an
# op's time against the bytes it must move, a model's against its batch, a
# sharding rule's against the devices it spans.
X_AXIS_BY_WORK = {
    "an op": "bytes moved (MB",
    "a model": "batch (rows",
    "a sharding rule": "shards of axis",
}
WORK = {
    "custom-vjp": "an op",
    "pallas": "an op",
    "ffi": "an op",
    "internals": "an op",
    "export": "a model",
    "memory-and-sharding": "a model",
    "custom-partitioning": "a sharding rule",
}


def template_project(rung) -> Path:
    from jax_ladder.rungs import template_dir

    return template_dir(rung) / "{{cookiecutter.project_name}}"


def template_plot_module(rung):
    """Every project's benchmarks/plot.py: the kit's jax_ladder/opcheck/plot.py."""
    path = REPO / "src" / "jax_ladder" / "opcheck" / "plot.py"
    spec = importlib.util.spec_from_file_location("template_plot", path)
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    return plot


def read_template_plot(rung):
    """The panels of a template's measured plot, read back by its own plot.py."""
    return template_plot_module(rung).read_plot(template_project(rung) / "docs/benchmark.svg")


@pytest.mark.parametrize(
    ("lo", "hi", "ticks"),
    [
        # Within 2.5 decades: 1, 2 and 5 in each (the pallas plot's 0.17..4 MB).
        (0.17, 4.0, [0.2, 0.5, 1, 2]),
        (0.45, 40.0, [0.5, 1, 2, 5, 10, 20]),
        # Too narrow for two of 1, 2, 5: every digit.
        (2.5, 4.5, [3, 4]),
        (1.5, 3.0, [2, 3]),
        # Wider: the decades only, every other one past six.
        (0.001, 100.0, [0.001, 0.01, 0.1, 1, 10, 100]),
        (1e-6, 1e3, [1e-6, 1e-4, 1e-2, 1, 100]),
        # Nothing to label: matplotlib's own ticks stay.
        (1.1, 1.9, []),
    ],
)
def test_log_ticks_label_few_plain_values(lo, hi, ticks):
    """Issue 41: the plots' log axes carry few labels (none overlap), at 1-2-5."""
    from jax_ladder.rungs import available

    plot = template_plot_module(available()[0])
    assert plot.log_ticks(lo, hi) == pytest.approx(ticks)


def test_template_plots_share_one_x_axis_per_kind_of_work_and_call_no_yardstick_a_bound():
    """Issue 41: the site shows every template's plot; the same kind of work is
    drawn against the same axis, and a dashed guide (a copy of the same bytes,
    which a small op's cached data can beat) is never called a roofline."""
    from jax_ladder.rungs import available

    assert set(WORK) == {rung.name for rung in available()}, (
        "say what each template's plot measures"
    )
    for rung in available():
        axis = X_AXIS_BY_WORK[WORK[rung.name]]
        for panel in read_template_plot(rung):
            assert panel.xlabel.startswith(axis), (rung.name, panel.title, panel.xlabel)
            for name in panel.guides:
                assert "roofline" not in name.lower(), (rung.name, name)
