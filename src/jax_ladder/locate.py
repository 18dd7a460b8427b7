"""`jax-ladder locate QUERY`: where a JAX concept lives, for the ninth rung.

Searches the Python sources of the installed `jax` and `jaxlib` packages (found
without importing them) and, with `--repo`, the `docs/` and `tests/` of a JAX
checkout. Hits are ranked: a module named after the query, then definitions
(`def`/`class`, primitives `*_p`, public re-exports `name as name`), then doc
headings and test names, then plain text (one line per file, the file's count
of matches breaking ties).

A query's words match across `_`, `-`, `.` and spaces, case-insensitively, so
`shard map` finds `shard_map`. A dotted query (`jax.lax.scan`) searches for its
last part and prefers files whose path holds the others.

Exit status: 0 with hits, 1 with none (like grep), 2 for a usage error.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from jax_ladder.options import UsageError

# kind -> score; higher ranks first.
SCORES = {
    "module": 100,
    "def": 90,
    "primitive": 85,
    "public": 80,
    "class": 90,
    "test module": 70,
    "doc page": 65,
    "heading": 60,
    "method": 55,
    "partial module": 50,
    "assign": 50,
    "test": 45,
    "partial def": 35,
    "text": 5,
}
DOC_SUFFIXES = {".md", ".rst", ".py", ".txt"}
FILE_KINDS = {"module", "partial module", "test module", "doc page"}  # hits on the file name

DEF = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")
PRIM_ASSIGN = re.compile(r"^(\w+)_p\s*=")
PRIM_NAME = re.compile(r"""Primitive\(\s*['"]([\w.\-]+)['"]""")
REEXPORT = re.compile(r"\b(\w+)\s+as\s+(\w+)\b")
ASSIGN = re.compile(r"^(\w+)\s*(?::[^=]+)?=(?!=)")
MD_HEADING = re.compile(r"^#{1,6}\s+(.*)")
RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")


@dataclass(frozen=True)
class Hit:
    score: float
    shown: str  # path as printed: relative to its root
    line: int
    kind: str
    text: str
    path: Path

    def sort_key(self) -> tuple[float, str, int]:
        return (-self.score, self.shown, self.line)


@dataclass(frozen=True)
class Query:
    text: str
    pattern: re.Pattern[str]  # the name, separators flexible
    hints: tuple[str, ...]  # dotted prefix parts, e.g. ("lax",) for jax.lax.scan

    @classmethod
    def parse(cls, text: str) -> Query:
        text = text.strip()
        if not text:
            raise UsageError("the query is empty; give a name or words, e.g. 'shard_map'")
        hints: tuple[str, ...] = ()
        name = text
        if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", text):
            *prefix, name = text.split(".")
            hints = tuple(p.lower() for p in prefix if p.lower() != "jax")
        words = [w for w in re.split(r"[\s_\-.]+", name) if w]
        if not words:
            raise UsageError(f"the query {text!r} has no words to search for")
        pattern = re.compile(r"[\s_\-.]?".join(re.escape(w) for w in words), re.IGNORECASE)
        return cls(text, pattern, hints)

    def full(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None


@dataclass(frozen=True)
class Root:
    label: str  # "jax 0.12.0.1 (installed)", "JAX checkout docs"
    base: Path  # shown paths are relative to this
    top: Path  # folder searched
    kind: str  # "source", "docs" or "tests"


def installed_roots() -> list[Root]:
    """The installed jax and jaxlib package folders, found without importing them."""
    roots = []
    for name in ("jax", "jaxlib"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if locations:
            top = Path(locations[0])
            try:
                label = f"{name} {metadata.version(name)} ({top})"
            except metadata.PackageNotFoundError:
                label = f"{name} ({top})"
            roots.append(Root(label, top.parent, top, "source"))
    return roots


def repo_roots(repo: Path) -> list[Root]:
    if not repo.is_dir():
        raise UsageError(f"--repo {str(repo)!r} is not a directory; give a JAX checkout")
    roots = [
        Root(f"{sub}/ of {repo}", repo, repo / sub, sub)
        for sub in ("docs", "tests")
        if (repo / sub).is_dir()
    ]
    if not roots:
        raise UsageError(
            f"--repo {str(repo)!r} has neither docs/ nor tests/; give the root of a JAX checkout"
        )
    return roots


def _files(root: Root) -> Iterator[Path]:
    suffixes = {".py"} if root.kind in ("source", "tests") else DOC_SUFFIXES
    for path in sorted(root.top.rglob("*")):
        if path.suffix in suffixes and path.is_file() and "__pycache__" not in path.parts:
            yield path


def _search_file(query: Query, root: Root, path: Path) -> list[Hit]:
    shown = path.relative_to(root.base).as_posix()
    parts = {part.removesuffix(".py").lower() for part in shown.split("/")}
    hint_bonus = 10 if query.hints and all(h in parts for h in query.hints) else 0
    public = "_src" not in parts and root.kind == "source"
    hits: list[Hit] = []

    def add(kind: str, line: int, text: str) -> None:
        # The public re-export (jax/lax/__init__.py) before the internal ones.
        score = SCORES[kind] + hint_bonus + (5 if kind == "public" and public else 0)
        hits.append(Hit(score, shown, line, kind, text.strip()[:120], path))

    stem = path.stem[:-5] if root.kind == "tests" and path.stem.endswith("_test") else path.stem
    if query.full(stem) or (path.name == "__init__.py" and query.full(path.parent.name)):
        add({"tests": "test module", "docs": "doc page"}.get(root.kind, "module"), 1, shown)
    elif root.kind == "source" and query.pattern.search(shown.removesuffix(".py")):
        add("partial module", 1, shown)

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return hits
    if query.pattern.search(text):
        classified, first_text, count = _scan_lines(query, root, text)
        for kind, number, line in classified:
            add(kind, number, line)
        if first_text is not None and not any(h.kind not in FILE_KINDS for h in hits):
            number, line = first_text
            score = SCORES["text"] + min(count, 40) / 10 + hint_bonus
            hits.append(Hit(score, shown, number, "text", line.strip()[:120], path))
    return hits


def _scan_lines(
    query: Query, root: Root, text: str
) -> tuple[list[tuple[str, int, str]], tuple[int, str] | None, int]:
    """The matching lines: (kind, number, line) for those that classify, the
    first that does not, and how many matched."""
    lines = text.splitlines()
    classified: list[tuple[str, int, str]] = []
    first_text: tuple[int, str] | None = None
    count = 0
    for number, line in enumerate(lines, 1):
        if not query.pattern.search(line):
            continue
        count += 1
        kind = _classify(query, root, line, lines[number] if number < len(lines) else "")
        if kind is not None:
            classified.append((kind, number, line))
        elif first_text is None:
            first_text = (number, line)
    return classified, first_text, count


def _classify(query: Query, root: Root, line: str, next_line: str) -> str | None:
    """The kind of a line that mentions the query, or None for plain text."""
    if root.kind == "docs":
        heading = MD_HEADING.match(line)
        if heading or (line.strip() and RST_UNDERLINE.match(next_line)):
            return "heading"
        return None
    match = DEF.match(line)
    if match:
        indent, what, name = match.groups()
        if root.kind == "tests" and name.lower().startswith("test"):
            return "test"
        if query.full(name):
            if what == "class":
                return "class"
            return "def" if not indent else "method"
        if query.pattern.search(name):
            return "test" if root.kind == "tests" else "partial def"
        return None
    if root.kind != "source":
        return None
    prim = PRIM_ASSIGN.match(line)
    named = PRIM_NAME.search(line)
    if (prim and query.full(prim.group(1))) or (named and query.full(named.group(1))):
        return "primitive"
    for a, b in REEXPORT.findall(line):
        if a == b and query.full(a):
            return "public"
    assign = ASSIGN.match(line)
    if assign and query.full(assign.group(1)):
        return "assign"
    return None


def locate(query: Query, roots: Iterable[Root]) -> list[Hit]:
    hits: list[Hit] = []
    for root in roots:
        for path in _files(root):
            hits.extend(_search_file(query, root, path))
    return sorted(hits, key=Hit.sort_key)


def render(query: Query, roots: list[Root], hits: list[Hit], limit: int) -> str:
    where = "; ".join(root.label for root in roots)
    shown = hits[:limit]
    lines = [f"{len(shown)} of {len(hits)} matches for {query.text!r} in {where}:"]
    width = max(len(f"{h.shown}:{h.line}") for h in shown)
    kinds = max(len(h.kind) for h in shown)
    for i, hit in enumerate(shown, 1):
        place = f"{hit.shown}:{hit.line}"
        lines.append(f"{i:>3}. {place:<{width}}  {hit.kind:<{kinds}}  {hit.text}")
    return "\n".join(lines)
