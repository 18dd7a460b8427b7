"""Refuse a project or package name that would break the generated project,
then write the files every project shares into it.

The rule is templates/name_rules.py, which `jax-ladder new` applies too, so
plain cookiecutter, cruft and the kit accept the same names; the shared files
come from their one source in the kit's package (templates/shared_files.py
says which and how). cookiecutter runs this hook as a rendered copy in a
temporary file, from the new project's folder, so the hook has to find the
kit's templates folder from what it is told.

Every template's hooks/pre_gen_project.py is a symbolic link to this one file
(cookiecutter runs only a template's own hooks/, and reads a link's target);
the kit's wheel carries their target as plain files, its sdist the links.
"""

import json
import os
import runpy
import sys
from pathlib import Path


def templates_folder() -> Path:
    candidates = []
    # cookiecutter: the template folder (relative to where cookiecutter started,
    # which a hook is not told: try the shell's directory, then the output folder).
    template = {{ cookiecutter._repo_dir | default("") | tojson }}
    if template:
        anchors = [os.environ.get("PWD", ""), {{ cookiecutter._output_dir | default("") | tojson }}]
        candidates += [Path(a, template) for a in anchors if a] + [Path(template)]
    # cookiecutter and cruft run hooks while their own working directory is the
    # template folder; Linux shows it as the parent process's cwd.
    candidates.append(Path(f"/proc/{os.getppid()}/cwd"))
    # cruft: the template's repository, when it is a local clone.
    repository = {{ cookiecutter._template | default("") | tojson }}
    candidates.append(Path(repository, "templates", "rung"))
    for candidate in candidates:
        if (candidate.parent / "name_rules.py").is_file():
            return candidate.parent
    sys.exit(
        "error: name_rules.py (beside the template folder) not found; run cookiecutter or "
        "cruft on a jax-ladder checkout, with an absolute path if it still fails"
    )


templates = templates_folder()
rules = runpy.run_path(str(templates / "name_rules.py"))
problem = rules["project_name_problem"]({{ cookiecutter.project_name | tojson }})
if problem:
    sys.exit(f"error: {problem}")
problem = rules["package_name_problem"]({{ cookiecutter.package_name | tojson }})
if problem:
    sys.exit(
        f"error: {problem}, so it is not a usable Python package name; "
        "choose another project_name or package_name"
    )
problem = rules["op_name_problem"]({{ cookiecutter.op_name | tojson }})
if problem:
    sys.exit(f"error: {problem}; choose another op_name")
shared = runpy.run_path(str(templates / "shared_files.py"))
# The answers, as JSON in a string: JSON's true, false and null are no Python.
shared["write_into"](Path.cwd(), templates, json.loads({{ cookiecutter | tojson | tojson }}))
