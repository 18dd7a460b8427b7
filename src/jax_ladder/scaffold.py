"""Generate a starter project from a rung's template."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from cookiecutter.main import cookiecutter

from jax_ladder import __version__
from jax_ladder.generation import Generation, project_files, record, update_skip
from jax_ladder.options import Option, UsageError, load_options, resolve
from jax_ladder.rungs import Rung, template_dir

Prompt = Callable[[Option, object], object]


# About 45 lines with its docstring: validate, then render, as one reading.
def scaffold(
    rung: Rung,
    output_dir: Path,
    given: dict[str, object],
    prompt: Prompt | None = None,
) -> Path:
    """Validate everything, then render. Returns the new project's path.

    `prompt(option, default)` asks for each option not in `given`; None means
    take defaults. Raises UsageError, and writes nothing, on any bad input.
    """
    template = template_dir(rung)
    options = load_options(template)
    given = dict(given)
    if prompt is not None:
        for key, option in options.items():
            if key not in given and not option.derived:
                given[key] = prompt(option, option.default)
    context = resolve(options, given)
    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(
            f"output directory {str(output_dir)!r} is a file; pass another --output-dir"
        )
    target = output_dir / str(context["project_name"])
    if target.exists():
        raise UsageError(
            f"{str(target)!r} already exists; remove it, or choose another --name or --output-dir"
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    project = render(rung, template, context, output_dir)
    generation = Generation(rung.name, dict(context), __version__)
    record(project, generation, project_files(project, update_skip(template)))
    return project


def render(rung: Rung, template: Path, context: dict[str, object], output_dir: Path) -> Path:
    """cookiecutter, with a failure reported as a GenerationError and no
    half-written project left behind."""
    try:
        project = cookiecutter(
            str(template),
            no_input=True,
            extra_context=dict(context),
            output_dir=str(output_dir),
            overwrite_if_exists=False,
        )
    except Exception as err:
        shutil.rmtree(output_dir / str(context["project_name"]), ignore_errors=True)
        raise GenerationError(
            f"generating {rung.name} failed ({type(err).__name__}: {err}); nothing was written"
        ) from err
    # pip byte-compiles every .py file it installs, the templates' inside this
    # package included, and cookiecutter copies the __pycache__/ folders that
    # leaves: they are not part of the template.
    for cache in sorted(Path(project).rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    return Path(project)


class GenerationError(Exception):
    """The template itself failed to render: a bug in the kit, not bad input."""
