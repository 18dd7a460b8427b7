"""Each generated file's role, and the README's "Adapt it" table (issue 25).

A template's `adapt.toml` (beside its `cookiecutter.json`, not generated)
lists the files of a generated project in table order, each with a role:

    [[file]]
    path = "src/{package}/reference.py"   # fnmatch glob, `*` crosses `/`
    role = "yours"                        # yours | declaration | machinery | optional
    what = "the plain-JAX reference: the op's formula, and the gradient oracle"
    when = {example = "!none"}            # optional: options that must hold

The first entry that matches a file, among those whose `when` holds, gives its
role. The README holds the table rendered from the list, between the markers
below, with Jinja for the names and the conditions; the kit's tests hold it
current and hold every baked project's files to the list. Also a script:

    python tests/adapt.py --write templates/<rung>     # rewrite the README's table
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROLES = {
    "yours": "yours (edit)",
    "declaration": "declaration (edit)",
    "machinery": "machinery (leave)",
    "optional": "optional (delete if unused)",
}
START, END = "<!-- adapt-table -->", "<!-- /adapt-table -->"
# Build and test outputs, which no template generates.
NOT_GENERATED = (
    "build/*",
    "*/__pycache__/*",
    "__pycache__/*",
    "*.so",
    ".pytest_cache/*",
    ".ruff_cache/*",
    ".mypy_cache/*",
)


@dataclass(frozen=True)
class Entry:
    path: str
    role: str
    what: str
    when: dict[str, str] = field(default_factory=dict)

    def holds(self, options: dict[str, str]) -> bool:
        """Whether `when` holds; "!value" means any value but that one."""
        for key, wanted in self.when.items():
            if wanted.startswith("!"):
                if options.get(key) == wanted[1:]:
                    return False
            elif options.get(key) != wanted:
                return False
        return True

    def glob(self, package: str, op: str) -> str:
        return self.path.format(package=package, op=op)


def load(template: Path) -> list[Entry]:
    data = tomllib.loads((template / "adapt.toml").read_text())
    entries = [Entry(**entry) for entry in data.get("file", [])]
    unknown = sorted({e.role for e in entries} - ROLES.keys())
    if unknown:
        raise ValueError(f"{template}/adapt.toml: unknown roles {unknown}; use {list(ROLES)}")
    return entries


def role_of(relative: str, entries: list[Entry], options, package: str, op: str) -> Entry | None:
    for entry in entries:
        if entry.holds(options) and fnmatch.fnmatchcase(relative, entry.glob(package, op)):
            return entry
    return None


def generated_files(project: Path) -> list[str]:
    names = (p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file())
    return sorted(n for n in names if not any(fnmatch.fnmatchcase(n, g) for g in NOT_GENERATED))


def role_problems(project: Path, entries: list[Entry], options, package: str, op: str):
    """Files no entry gives a role, and entries (whose `when` holds) that
    match no file: what the table would get wrong about this project."""
    files = generated_files(project)
    unlisted = [f for f in files if not role_of(f, entries, options, package, op)]
    problems = [f"{f}: no entry in adapt.toml" for f in unlisted]
    for entry in entries:
        pattern = entry.glob(package, op)
        if entry.holds(options) and not fnmatch.filter(files, pattern):
            problems.append(f"adapt.toml entry {entry.path!r} matches no file (when {entry.when})")
    return problems


def _jinja_path(path: str) -> str:
    return path.replace("{package}", "{{ cookiecutter.package_name }}").replace(
        "{op}", "{{ cookiecutter.op_name }}"
    )


def _jinja_condition(when: dict[str, str]) -> str:
    tests = []
    for key, value in when.items():
        negated = value.startswith("!")
        tests.append(f"cookiecutter.{key} {'!=' if negated else '=='} {value.lstrip('!')!r}")
    return " and ".join(tests)


def table(entries: list[Entry]) -> str:
    """The README's table, as Jinja the template renders (rows under a `when`
    appear only where it holds)."""
    lines = ["| file | role | what it is |", "| -- | -- | -- |"]
    for entry in entries:
        row = f"| `{_jinja_path(entry.path)}` | {ROLES[entry.role]} | {entry.what} |"
        if entry.when:
            lines[-1] += f"\n{{%- if {_jinja_condition(entry.when)} %}}"
            row += "\n{%- endif %}"
        lines.append(row)
    return "\n".join(lines)


def readme_with_table(readme: str, entries: list[Entry]) -> str:
    start, end = readme.index(START) + len(START), readme.index(END)
    # Blank lines around the table: mdformat (the projects' pre-commit hook) wants them.
    return readme[:start] + "\n\n" + table(entries) + "\n\n" + readme[end:]


def readme_path(template: Path) -> Path:
    return template / "{{cookiecutter.project_name}}" / "README.md"


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("template", type=Path, help="a template folder, e.g. templates/pallas")
    parser.add_argument("--write", action="store_true", help="rewrite the README's table")
    args = parser.parse_args()
    readme = readme_path(args.template)
    text = readme.read_text()
    wanted = readme_with_table(text, load(args.template))
    if args.write:
        readme.write_text(wanted)
        return 0
    print(table(load(args.template)))
    return 0 if wanted == text else 1


if __name__ == "__main__":
    sys.exit(_main())
