"""The files every generated project shares, written into it from their one
source in the kit's package: the conformance engine (jax_ladder/opcheck/) and
the repository's plumbing (jax_ladder/project_files/: CI, docs, nox, licence).

Every template's hooks/pre_gen_project.py runs `write_into` (this file sits
beside the templates, as name_rules.py does, so that plain cookiecutter and
cruft find it too); `jax-ladder update` re-renders a template, so it brings
a project the current copies. Standard library only, plus Jinja2, which
cookiecutter itself needs.

What a copy gets on its way into a project:
- the engine's relative imports of its sibling modules (`from .compare
  import`; in the conformance package, `from ..compare import`) become the
  flat imports of a project's tests/ folder (`from compare import`); the
  conformance package's imports of its own modules (`from .oracles import`)
  stay relative, as tests/conformance/ is a package there too (a `# isort:
  split` keeps the two kinds apart in the package's modules: in the kit,
  `from ..compare` sorts before `from .oracles`, in a project `from compare`
  after it);
- a first line that names the kit's version (not in LICENSE, whose text
  stays the licence's own);
- files named `*.jinja` are rendered with the project's answers (their
  `cookiecutter.*` variables) and lose the suffix; `gitignore` becomes
  `.gitignore` (a `.gitignore` in the kit's source tree would ignore files
  of the kit).

Two steps, because cookiecutter refuses to generate into a folder that
already exists (tests/, say): hooks/pre_gen_project.py writes the files
under STAGING, with a copy of this module, and every template's
hooks/post_gen_project.py first calls `land`, which moves each into place
unless the template wrote its own file there (a template's own file wins),
removes STAGING and keeps the accelerator workflow the project chose. `_shared_skip` in a template's cookiecutter.json lists
the shared files it does without. tests/test_shared_files.py in the kit
holds both to their declared reasons.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

STAGING = ".jax-ladder-shared"

# The conformance package's modules (jax_ladder/opcheck/conformance/).
CONFORMANCE = (
    "__init__.py",
    "declaration.py",
    "signature.py",
    "validation.py",
    "draws.py",
    "oracles.py",
    "results.py",
    "hlo.py",
    "cells_values.py",
    "cells_vmap.py",
    "cells_sizes.py",
    "cells_autodiff.py",
    "cells_control_flow.py",
    "cells_hard.py",
    "cells_sharding.py",
    "cells_export.py",
)
# Engine module (its path under jax_ladder/opcheck/) -> its path in a project.
ENGINE = {
    "compare.py": "tests/compare.py",
    "devices.py": "tests/devices.py",
    **{f"conformance/{name}": f"tests/conformance/{name}" for name in CONFORMANCE},
    "support_table.py": "tests/support_table.py",
    "plot.py": "benchmarks/plot.py",
}
RENAMED = {"gitignore": ".gitignore"}
NOT_STAMPED = {"LICENSE"}
# A module's import of a sibling engine module: `from .compare import` beside
# it, `from ..compare import` from inside the conformance package.
RELATIVE_IMPORT = re.compile(r"^(\s*)from \.(\w+) import", re.MULTILINE)
PARENT_IMPORT = re.compile(r"^(\s*)from \.\.(\w+) import", re.MULTILINE)


def package_dir(templates: Path) -> Path:
    """The kit's package, from its templates folder: src/jax_ladder in a
    checkout, the folder holding templates/ in an installed wheel."""
    for candidate in (templates.parent / "src" / "jax_ladder", templates.parent):
        if (candidate / "opcheck" / "conformance" / "__init__.py").is_file():
            return candidate
    raise FileNotFoundError(f"no jax_ladder package with opcheck/ beside {templates}")


def kit_version(package: Path) -> str:
    found = re.search(r'^__version__ = "([^"]+)"', (package / "__init__.py").read_text(), re.M)
    return found.group(1) if found else "unknown"


def shared_files(package: Path, context: dict) -> dict[str, str]:
    """Every shared file as a project receives it: its path there -> its text."""
    version = kit_version(package)
    files = {}
    for name, target in ENGINE.items():
        text = flat_imports(name, (package / "opcheck" / name).read_text())
        files[target] = stamp(text, target, version, f"opcheck/{name}")
    root = package / "project_files"
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        if "__pycache__" in relative:
            continue
        text = path.read_text()
        if relative.endswith(".jinja"):
            relative = relative.removesuffix(".jinja")
            text = render(text, context)
        target = RENAMED.get(relative, relative)
        files[target] = stamp(text, target, version, f"project_files/{relative}")
    return files


def flat_imports(name: str, text: str) -> str:
    """An engine module's text with its imports of sibling engine modules made
    flat (a project's tests/ folder is no package); inside the conformance
    package, its imports of its own modules stay relative."""
    if "/" in name:
        return PARENT_IMPORT.sub(r"\1from \2 import", text)
    return RELATIVE_IMPORT.sub(r"\1from \2 import", text)


def stamp(text: str, target: str, version: str, source: str) -> str:
    """The text with a first line naming where it came from, in the file's own
    comment syntax."""
    if target in NOT_STAMPED:
        return text
    line = f"jax-ladder {version}: {source}, refreshed by jax-ladder update"
    if target.endswith(".md"):
        return f"<!-- {line} -->\n\n{text}"
    if text.startswith("#!"):  # a script's shebang stays first (nox's NOX202 asks for one)
        shebang, _, rest = text.partition("\n")
        return f"{shebang}\n# {line}\n{rest}"
    return f"# {line}\n{text}"


def render(text: str, context: dict) -> str:
    import jinja2  # cookiecutter's own dependency

    environment = jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return environment.from_string(text).render(cookiecutter=context)


def write_into(project: Path, templates: Path, context: dict) -> None:
    """Stage the shared files (but those the template skips, `_shared_skip`)
    and this module in the project being generated, for `land`."""
    skipped = set(context.get("_shared_skip", ()))
    staging = project / STAGING
    for target, text in shared_files(package_dir(templates), context).items():
        if target in skipped:
            continue
        path = staging / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    shutil.copy2(Path(__file__), staging / Path(__file__).name)


def land(project: Path, accelerator_ci: str) -> None:
    """Move each staged file into place, where the template wrote none; drop
    STAGING. Then the accelerator_ci option: _accelerator_ci/<choice>.yml
    becomes .github/workflows/accelerator.yml (for "none", nothing) and the
    folder goes (the workflows are plain files, so they stay free of Jinja)."""
    staging = project / STAGING
    for path in sorted(p for p in staging.rglob("*") if p.is_file()):
        relative = path.relative_to(staging)
        target = project / relative
        if relative.as_posix() != Path(__file__).name and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            path.replace(target)
    shutil.rmtree(staging)
    choices = project / "_accelerator_ci"
    if accelerator_ci != "none":
        (choices / f"{accelerator_ci}.yml").replace(project / ".github/workflows/accelerator.yml")
    shutil.rmtree(choices)
